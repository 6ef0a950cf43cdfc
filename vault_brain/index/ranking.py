"""The full-text answer any store gives (index/port.py's `TextSearch.rank_text`), built from
a few ranked queries each backend answers its own way (SQLite: FTS5 bm25; Postgres: BM25
in SQL): whole notes ranked first, then the chunks of the best of them.

A note's score mixes its best chunk's rank with its whole text's, each min-max normalised:
(1 - note_weight) · chunk + note_weight · note, so evidence spread over several chunks
counts; the snippet stays the best chunk's (text.note_weight, chosen on the question and
IR sets, docs/benchmarks.md). Ranking every matching chunk was most of a search's time;
ranking the chunks of the best `notes` notes gives the same nDCG@10 on all 12 sets in a
third of it. Then, for the calibration: how many notes hold each of the query's groups
and which groups each of the best notes holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vault_brain.index.records import ChunkHit, Filters, TextHit, TextQuery, TextRanking


class Queries(Protocol):
    """The named queries a backend answers (its Reads) that the ranking is made of: scores
    higher-is-better on the backend's own scale."""

    def search_text(self, query: TextQuery, filters: Filters, limit: int) -> list[ChunkHit]: ...

    def search_text_notes(
        self, query: TextQuery, filters: Filters, limit: int
    ) -> list[tuple[int, float]]: ...

    def search_text_within(
        self, query: TextQuery, note_rowids: Sequence[int], limit: int
    ) -> list[ChunkHit]: ...

    def chunks_of_notes(self, note_rowids: Sequence[int]) -> list[tuple[int, int, str, str]]: ...

    def text_stats(self, query: TextQuery) -> tuple[int, list[int]]: ...

    def text_matches(self, query: TextQuery, note_rowids: Sequence[int]) -> dict[int, set[int]]: ...


def rank_text(
    reads: Queries,
    query: TextQuery,
    filters: Filters,
    notes: int,
    note_weight: float,
    evidence: int,
) -> TextRanking:
    """The best `notes` notes for the query, best first, with the evidence of the best
    `evidence` of them (see the module's docstring)."""
    if not query:
        return TextRanking()
    if note_weight <= 0:
        ranked = [
            (h.note_rowid, h.chunk_rowid, h.score)
            for h in _best_chunk_per_note(reads.search_text(query, filters, notes))
        ]
    else:
        ranked = _mixed(reads, query, filters, notes, note_weight)
    top = ranked[: max(0, evidence)]
    if not top:
        return TextRanking([TextHit(n, c, s) for n, c, s in ranked])
    count, doc_freq = reads.text_stats(query)
    matched = reads.text_matches(query, [n for n, _, _ in top])
    hits = [
        TextHit(n, c, s, frozenset(matched.get(n, ()))) if i < len(top) else TextHit(n, c, s)
        for i, (n, c, s) in enumerate(ranked)
    ]
    return TextRanking(hits, count, tuple(doc_freq))


def _mixed(
    reads: Queries, query: TextQuery, filters: Filters, depth: int, w: float
) -> list[tuple[int, int, float]]:
    """(note, best chunk, mixed score) best first: whole notes ranked, then the chunks of
    the best `depth` of them; a third of the depth in notes counts for the note-level part."""
    pool = reads.search_text_notes(query, filters, depth)
    best = _best_chunk_per_note(reads.search_text_within(query, [n for n, _ in pool], depth))
    notes = pool[: depth // 3]
    chunk_of = {h.note_rowid: h.chunk_rowid for h in best}
    missing = [n for n, _ in notes if n not in chunk_of]
    chunk_of.update(_snippet_chunks(reads, query.groups, missing))
    c = _minmax({h.note_rowid: h.score for h in best})
    n = _minmax(dict(notes))
    fused = [
        (rowid, chunk_of[rowid], (1 - w) * c.get(rowid, 0.0) + w * n.get(rowid, 0.0))
        for rowid in dict.fromkeys([*n, *c])
        if rowid in chunk_of
    ]
    fused.sort(key=lambda h: (-h[2], h[0]))
    return fused


def _best_chunk_per_note(hits: Sequence[ChunkHit]) -> list[ChunkHit]:
    """The first (best) chunk of each note, in the order given."""
    seen: dict[int, ChunkHit] = {}
    for h in hits:
        seen.setdefault(h.note_rowid, h)
    return list(seen.values())


def _snippet_chunks(
    reads: Queries, terms: Sequence[tuple[str, ...]], note_rowids: Sequence[int]
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
