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
from typing import TYPE_CHECKING

from vault_brain.index import analysis
from vault_brain.index.analysis import MAX_QUERY_TERMS
from vault_brain.index.stopwords import STOPWORDS

if TYPE_CHECKING:
    from vault_brain.index.store import Reads, Writes

__all__ = [
    "MAX_QUERY_TERMS",
    "analyzer_changed",
    "fts_query",
    "fts_text",
    "mark_analyzed",
    "query_terms",
    "vault_languages",
]

_ANY_STOPWORD = frozenset().union(*STOPWORDS.values())


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


def analyzer_changed(reads: Reads, configured: Sequence[str]) -> bool:
    """True when the index was analysed by another analyser version or for other
    configured languages (or never): the next sync must re-analyse every note."""
    return reads.get_meta("text_analyzer") != analysis.identity(configured)


def mark_analyzed(writes: Writes, configured: Sequence[str]) -> None:
    """Record, after a full sync, what the index's full text was analysed with."""
    writes.set_meta("text_analyzer", analysis.identity(configured))
    writes.set_meta("text_languages", json.dumps(list(configured)))


def vault_languages(reads: Reads) -> tuple[tuple[str, ...], str | None]:
    """The languages the index's notes were analysed in (most notes first) plus the
    configured ones, and the main language (the one most notes are in). Read from the
    index, never from a caller's settings, so every process matches what was written;
    remembered until the index changes (counting them took 0.3 ms of every search)."""
    return reads.per_version("vault_languages", lambda: _vault_languages(reads))


def _vault_languages(reads: Reads) -> tuple[tuple[str, ...], str | None]:
    counts = reads.note_languages()
    configured = json.loads(reads.get_meta("text_languages") or "[]")
    ordered = sorted(counts, key=lambda lang: (-counts[lang], lang))
    languages = tuple(dict.fromkeys([*ordered, *configured]))
    dominant = ordered[0] if ordered else (configured[0] if configured else None)
    return languages or ("en",), dominant
