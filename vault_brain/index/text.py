"""The full-text arm: what the FTS table is fed, and how a question is matched against it.

Analysis itself (languages, stemming, stopwords, CJK and Thai bigrams) lives in
`index/analysis.py` as pure functions; this module ties it to the index: the languages a
vault's notes were analysed in are read from the index (never from the caller's settings,
so every process matches what the indexer wrote), and a change of the configured languages
or of the analyser makes the next full sync re-analyse every note.

Queries come from models as natural-language questions, so the match keeps the content
words, drops the stopwords of the question's language, quotes every form (no FTS5 operator
or syntax error can come from user text) and joins them with OR so that bm25 ranks notes
by how many terms they share instead of requiring all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from vault_brain.index import analysis, store
from vault_brain.index.analysis import MAX_QUERY_TERMS
from vault_brain.index.db import Connection
from vault_brain.index.search import NoteHit, collapse
from vault_brain.index.stopwords import STOPWORDS

__all__ = [
    "MAX_QUERY_TERMS",
    "analyzer_changed",
    "fts_query",
    "fts_text",
    "mark_analyzed",
    "query_terms",
    "search_notes",
    "vault_languages",
]

_ANY_STOPWORD = frozenset().union(*STOPWORDS.values())
# The share of the whole-note score in a note's full-text score (text.note_weight):
# chosen on the question and IR sets, docs/benchmarks.md.
NOTE_WEIGHT = 0.3


def fts_text(text: str, lang: str = "en") -> str:
    """Text as it goes into the FTS table for a note in `lang`."""
    return analysis.analyze(text, lang)


def query_terms(query: str) -> list[str]:
    """The words of a question, lowercased and unique, in order (CJK as bigrams), without
    stopwords of any language unless nothing else is left. For highlighting snippets."""
    terms = list(dict.fromkeys(analysis.words(query)))
    content = [t for t in terms if t not in _ANY_STOPWORD] or terms
    return content[:MAX_QUERY_TERMS]


def fts_query(
    query: str, languages: Sequence[str] = ("en",), dominant: str | None = None
) -> str | None:
    """A question as an FTS5 MATCH expression over notes in `languages` (each term ORs its
    forms in all of them); None if it has no terms."""
    return analysis.match_expression(analysis.query_forms(query, languages, dominant))


def vault_languages(conn: Connection) -> tuple[list[str], str | None]:
    """The languages the index's notes were analysed in (most notes first) plus the
    configured ones, and the main language (the one most notes are in)."""
    counts = store.note_languages(conn)
    configured = json.loads(store.get_meta(conn, "text_languages") or "[]")
    ordered = sorted(counts, key=lambda lang: (-counts[lang], lang))
    languages = list(dict.fromkeys([*ordered, *configured]))
    dominant = ordered[0] if ordered else (configured[0] if configured else None)
    return languages or ["en"], dominant


def search_notes(
    conn: Connection,
    query: str,
    filters: store.Filters,
    depth: int,
    note_weight: float = NOTE_WEIGHT,
) -> list[NoteHit]:
    """The full-text arm: notes best first, each with the chunk that gives its snippet.
    `depth` is how many notes the caller may use (it over-fetches chunks to fill it).

    A note's score mixes its best chunk's bm25 with its whole text's bm25 (its notes_fts
    row), each min-max normalised: (1 - note_weight) * chunk + note_weight * note, so that
    evidence spread over several chunks counts; the snippet stays the best chunk's."""
    languages, dominant = vault_languages(conn)
    terms = analysis.query_forms(query, languages, dominant)
    match = analysis.match_expression(terms)
    if not match:
        return []
    best = collapse(store.search_fts(conn, match, filters, depth * 3))
    if note_weight <= 0:
        return best
    notes = store.search_fts_notes(conn, match, filters, depth)
    chunk_of = {h.note_rowid: h.chunk_rowid for h in best}
    missing = [n for n, _ in notes if n not in chunk_of]
    chunk_of.update(_snippet_chunks(conn, terms, missing))
    c = _minmax({h.note_rowid: h.score for h in best})
    n = _minmax(dict(notes))
    w = note_weight
    fused = [
        NoteHit(rowid, chunk_of[rowid], (1 - w) * c.get(rowid, 0.0) + w * n.get(rowid, 0.0))
        for rowid in dict.fromkeys([*n, *c])
        if rowid in chunk_of
    ]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused


def _snippet_chunks(
    conn: Connection, terms: Sequence[tuple[str, ...]], note_rowids: Sequence[int]
) -> dict[int, int]:
    """For notes that the whole-note row found but whose chunks ranked too low to be among
    the fetched chunk hits: the chunk that contains most of the question's terms (stems
    found as substrings of its lowercased text; the first chunk on a tie). FTS5 would rank
    every match in the vault again even to score one note's chunks."""
    out: dict[int, tuple[int, int]] = {}  # note -> (terms found, chunk)
    for note_rowid, chunk_rowid, chunk_text, _ in store.chunks_of_notes(conn, note_rowids):
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


def analyzer_changed(conn: Connection, configured: Sequence[str]) -> bool:
    """True when the index was analysed by another analyser version or for other
    configured languages (or never): the next sync must re-analyse every note."""
    return store.get_meta(conn, "text_analyzer") != analysis.identity(configured)


def mark_analyzed(conn: Connection, configured: Sequence[str]) -> None:
    """Record, after a full sync, what the index's full text was analysed with."""
    store.set_meta(conn, "text_analyzer", analysis.identity(configured))
    store.set_meta(conn, "text_languages", json.dumps(list(configured)))
