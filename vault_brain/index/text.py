"""The full text's bookkeeping in the index, for every backend: which analyser and
languages its text was analysed with, and which languages a question is analysed in.

Analysis itself (languages, stemming, stopwords, CJK and Thai n-grams) lives in
`text/analysis.py` as pure functions; this module ties it to the index: the languages a
vault's notes were analysed in are read from the index (never from the caller's settings,
so every process matches what the indexer wrote), and a change of the configured languages
or of the analyser makes the next full sync re-analyse every note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from vault_brain.text import analysis

if TYPE_CHECKING:
    from vault_brain.index.port import Meta, MetaWrites

__all__ = ["analyzer_changed", "languages_of", "mark_analyzed"]


def analyzer_changed(reads: Meta, configured: Sequence[str]) -> bool:
    """True when the index was analysed by another analyser version or for other
    configured languages (or never): the next sync must re-analyse every note."""
    return reads.get_meta("text_analyzer") != analysis.identity(configured)


def mark_analyzed(writes: MetaWrites, configured: Sequence[str]) -> None:
    """Record, after a full sync, what the index's full text was analysed with."""
    writes.set_meta("text_analyzer", analysis.identity(configured))
    writes.set_meta("text_languages", json.dumps(list(configured)))


def languages_of(
    counts: Mapping[str, int], configured_json: str | None
) -> tuple[tuple[str, ...], str | None]:
    """A backend's `vault_languages()` (index/port.py's TextSearch) from its notes per
    language and the configured languages mark_analyzed recorded (meta "text_languages"):
    the languages the notes were analysed in, most notes first, then the configured ones;
    and the main language (the one most notes are in). Read from the index, never from a
    caller's settings, so every process matches what the indexer wrote."""
    configured = json.loads(configured_json or "[]")
    ordered = sorted(counts, key=lambda lang: (-counts[lang], lang))
    languages = tuple(dict.fromkeys([*ordered, *configured]))
    dominant = ordered[0] if ordered else (configured[0] if configured else None)
    return languages or ("en",), dominant
