"""The full-text arm: the question analysed in every language the vault's notes were
analysed in (text/analysis.py), bm25 over chunks and over whole notes (FTS5).

A note's score mixes its best chunk's bm25 with its whole text's bm25 (its notes_fts row),
each min-max normalised: (1 - note_weight) · chunk + note_weight · note, so evidence spread
over several chunks counts; the snippet stays the best chunk's (text.note_weight, chosen on
the question and IR sets, docs/benchmarks.md). Notes are ranked first and chunks only
within the best of them: bm25 over every matching chunk was most of a search's time."""

from __future__ import annotations

from collections.abc import Sequence

from vault_brain.config import TextSettings
from vault_brain.index.records import TextQuery
from vault_brain.index.store import Reads
from vault_brain.index.text import vault_languages
from vault_brain.search.base import ArmResult, NoteHit, Request, collapse
from vault_brain.search.calibration import idf_weights, text_coverage
from vault_brain.text import analysis


def text_query(reads: Reads, query: str) -> TextQuery:
    """The query's words in their indexed forms (stems in the vault's languages, CJK and
    Thai n-grams), one group per word."""
    languages, dominant = vault_languages(reads)
    return TextQuery(tuple(analysis.query_forms(query, languages, dominant)))


class FullTextArm:
    name = "fts"

    def __init__(self, settings: TextSettings | None = None) -> None:
        self.settings = settings or TextSettings()  # read at each search: benches sweep it

    def retrieve(self, reads: Reads, request: Request) -> ArmResult:
        query = text_query(reads, request.query)
        if not query:
            return ArmResult(self.name, [])
        w = self.settings.note_weight
        if w <= 0:
            best = collapse(reads.search_text(query, request.filters, request.depth))
            return ArmResult(self.name, best, evidence=_evidence(reads, query, best))
        # Whole notes first, then the chunks of the best `depth` of them only: the same
        # nDCG@10 on all 12 sets as ranking every chunk, in a third of the time.
        pool = reads.search_text_notes(query, request.filters, request.depth)
        best = collapse(reads.search_text_within(query, [n for n, _ in pool], request.depth))
        notes = pool[: request.depth // 3]
        chunk_of = {h.note_rowid: h.chunk_rowid for h in best}
        missing = [n for n, _ in notes if n not in chunk_of]
        chunk_of.update(_snippet_chunks(reads, query.groups, missing))
        c = _minmax({h.note_rowid: h.score for h in best})
        n = _minmax(dict(notes))
        fused = [
            NoteHit(rowid, chunk_of[rowid], (1 - w) * c.get(rowid, 0.0) + w * n.get(rowid, 0.0))
            for rowid in dict.fromkeys([*n, *c])
            if rowid in chunk_of
        ]
        fused.sort(key=lambda h: (-h.score, h.note_rowid))
        return ArmResult(self.name, fused, evidence=_evidence(reads, query, fused))


# Notes whose evidence is computed (the most a search shows, with room to spare).
EVIDENCE_DEPTH = 60


def _evidence(reads: Reads, query: TextQuery, hits: Sequence[NoteHit]) -> dict[int, float]:
    """Full-text coverage of the best hits (search/calibration.py turns it into evidence,
    knowing whether vectors answered too)."""
    top = list(hits[:EVIDENCE_DEPTH])
    if not top:
        return {}
    notes, counts = reads.text_stats(query)
    weights = idf_weights(notes, counts)
    matched = reads.text_matches(query, [h.note_rowid for h in top])
    best = max(h.score for h in top) or 1.0
    return {
        h.note_rowid: text_coverage(matched.get(h.note_rowid, set()), weights, h.score / best)
        for h in top
    }


def _snippet_chunks(
    reads: Reads, terms: Sequence[tuple[str, ...]], note_rowids: Sequence[int]
) -> dict[int, int]:
    """For notes that the whole-note row found but whose chunks ranked too low to be among
    the fetched chunk hits: the chunk that contains most of the question's terms (stems
    found as substrings of its lowercased text; the first chunk on a tie). FTS5 would rank
    every match in the vault again even to score one note's chunks."""
    out: dict[int, tuple[int, int]] = {}  # note -> (terms found, chunk)
    for note_rowid, chunk_rowid, chunk_text, _ in reads.chunks_of_notes(note_rowids):
        lower = chunk_text.lower()
        found = sum(1 for forms in terms if any(f.rstrip("*") in lower for f in forms))
        if note_rowid not in out or found > out[note_rowid][0]:
            out[note_rowid] = (found, chunk_rowid)
    return {note: chunk for note, (_, chunk) in out.items()}


def _minmax(scores: dict[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}
