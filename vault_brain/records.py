"""What Brain returns: plain immutable records that the CLI prints and the MCP tools turn
into compact JSON.

NamedTuples, not frozen dataclasses, with real annotations (no `from __future__ import
annotations`): a process pays ~1 ms at import for each frozen dataclass (Python 3.11
compiles six methods per class) and NamedTuple compiles every string annotation, and the
warm path's client (cli.py) imports this module for every search it asks. `plain` turns a
record into the dicts and lists `json` writes; `_replace` makes a changed copy.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple


class Hit(NamedTuple):
    id: str
    title: str
    path: str
    summary: str
    snippet: str
    score: float
    updated: str | None
    explain: dict[str, Any] | None = None  # per arm rank and score, and the fused score
    confidence: str = ""  # "high" | "medium" | "low" | "none": the score in a word


class Indexing(NamedTuple):
    """A first pass over the vault in progress: answers come from what is indexed so far."""

    done: int
    total: int


class SearchResult(NamedTuple):
    hits: list[Hit]
    mode: str
    degraded: bool
    reason: str | None = None
    indexing: Indexing | None = None
    # Which embeddings answered: "instant", "strong", or "instant+strong" (both, while the
    # strong tier covers part of the vault: search/semantic.py).
    vector_tier: str | None = None
    strong: Indexing | None = None  # the strong tier's coverage while it is incomplete
    below_cutoff: int = 0  # hits left out for scoring under search.min_score

    @property
    def nothing_relevant(self) -> bool:
        """No hit, and the index is complete: the vault lacks it. While a first pass runs
        an empty answer only means "not indexed yet", which `indexing` says instead."""
        return not self.hits and self.indexing is None


class NoteRef(NamedTuple):
    id: str | None
    title: str
    path: str | None


class NoteSummary(NamedTuple):
    id: str
    title: str
    path: str
    summary: str
    updated: str | None


class NotePage(NamedTuple):
    notes: list[NoteSummary]
    next_cursor: str | None
    indexing: Indexing | None = None  # a first pass is running: the list may be incomplete


class RelatedNote(NamedTuple):
    """A note worth reading next (by a link either way, or by meaning), with one line
    saying what it holds."""

    id: str
    title: str
    summary: str


class NoteView(NamedTuple):
    id: str
    title: str
    path: str
    summary: str
    tags: list[str]
    aliases: list[str]
    created: str | None
    updated: str | None
    version: str
    content: str
    truncated: bool
    links_out: list[NoteRef]
    backlinks: list[NoteRef]
    related: Sequence[RelatedNote] = ()


class SaveResult(NamedTuple):
    id: str
    path: str
    version: str
    duplicate_of: str | None = None
    indexed: bool = True  # False: the file is written, the index catches up later


class Trashed(NamedTuple):
    id: str  # the note's id (whatever name the caller gave)
    path: str  # where the note was
    trashed_to: str  # where it is now, in the vault's .trash/


class Status(NamedTuple):
    vault: str
    index_path: str
    notes: int
    chunks: int
    vectors: int
    pending_vectors: int
    pending_summaries: int
    embedding: str | None
    dimension: int | None
    index_bytes: int
    indexer: bool  # this process indexes the vault
    last_error: str | None  # the latest of embed_error and summary_error
    embed_error: str | None = None
    summary_error: str | None = None
    summary_model: str | None = None
    watched: bool = False  # some process (watch, serve) keeps the index in step right now
    # The process holding the indexer role and what for: "watch" (watch or serve), "index"
    # (a `vault-brain index` run), "refresh" (a search catching up); None when nobody does.
    indexer_pid: int | None = None
    indexer_role: str | None = None
    indexing: Indexing | None = None
    strong_model: str | None = None  # the strong tier's model, when one is configured
    strong_vectors: int = 0  # chunks it has embedded
    strong_pending: int = 0
    strong_error: str | None = None
    # The matrix kernel the strong tier runs (checked at load against reference vectors)
    # and its worst cosine with them, as the process that embedded last recorded it.
    strong_kernel: str | None = None
    strong_agreement: float | None = None
    # While a process works through the strong tier's backlog: chunks/s over the recent
    # past, and the seconds left at that rate.
    strong_rate: float | None = None
    strong_eta_seconds: int | None = None
    # The vectors a hybrid or vector search reads now: "instant", "strong" or
    # "instant+strong" (search/semantic.py); None without embeddings.
    vector_tier: str | None = None


def plain(value: Any) -> Any:
    """A record (and the records, lists and dicts in it) as dicts and lists for `json`, as
    `dataclasses.asdict` gave them: a NamedTuple alone would be written as a list."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
