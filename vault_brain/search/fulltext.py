"""The full-text arm: the question analysed in every language the vault's notes were
analysed in (text/analysis.py), asked of the index as one question (index/port.py's
`TextSearch.rank_text`), and the answer's evidence turned into each note's coverage of the
question (search/calibration.py).

How a store ranks notes and their chunks (SQLite: FTS5 bm25 over whole notes, then the
chunks of the best of them, mixed by text.note_weight) is the store's business; this arm
only says how deep to rank, how much whole notes weigh, and how many notes' evidence it
weighs."""

from __future__ import annotations

from vault_brain.config import TextSettings
from vault_brain.index.port import TextSearch
from vault_brain.index.records import TextQuery, TextRanking
from vault_brain.search.base import ArmResult, NoteHit, Request
from vault_brain.search.calibration import idf_weights, text_coverage
from vault_brain.text import analysis

# Notes whose evidence is computed (the most a search shows, with room to spare).
EVIDENCE_DEPTH = 60


def text_query(reads: TextSearch, query: str) -> TextQuery:
    """The query's words in their indexed forms (stems in the vault's languages, CJK and
    Thai n-grams), one group per word."""
    languages, dominant = reads.vault_languages()
    return TextQuery(tuple(analysis.query_forms(query, languages, dominant)))


class FullTextArm:
    name = "fts"

    def __init__(self, settings: TextSettings | None = None) -> None:
        self.settings = settings or TextSettings()  # read at each search: benches sweep it

    def retrieve(self, reads: TextSearch, request: Request) -> ArmResult:
        query = text_query(reads, request.query)
        if not query:
            return ArmResult(self.name, [])
        ranking = reads.rank_text(
            query,
            request.filters,
            notes=request.depth,
            note_weight=self.settings.note_weight,
            evidence=EVIDENCE_DEPTH,
        )
        hits = [NoteHit(h.note_rowid, h.chunk_rowid, h.score) for h in ranking.hits]
        return ArmResult(self.name, hits, evidence=_evidence(ranking))


def _evidence(ranking: TextRanking) -> dict[int, float]:
    """Full-text coverage of the best hits (search/calibration.py turns it into evidence,
    knowing whether vectors answered too)."""
    top = ranking.hits[:EVIDENCE_DEPTH]
    if not top:
        return {}
    weights = idf_weights(ranking.notes, ranking.doc_freq)
    best = max(h.score for h in top) or 1.0
    return {h.note_rowid: text_coverage(h.matched, weights, h.score / best) for h in top}
