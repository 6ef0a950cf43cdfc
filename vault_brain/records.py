"""What Brain returns: plain frozen records that the CLI prints and the MCP tools turn into
compact JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    path: str
    summary: str
    snippet: str
    score: float
    updated: str | None
    explain: dict[str, Any] | None = None  # per arm rank and score, and the fused score
    confidence: str = ""  # "high" | "medium" | "low" | "none": the score in a word


@dataclass(frozen=True)
class Indexing:
    """A first pass over the vault in progress: answers come from what is indexed so far."""

    done: int
    total: int


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    mode: str
    degraded: bool
    reason: str | None = None
    indexing: Indexing | None = None
    vector_tier: str | None = None  # "instant" | "strong": which embeddings answered
    strong: Indexing | None = None  # the strong tier's coverage while it is incomplete
    below_cutoff: int = 0  # hits left out for scoring under search.min_score

    @property
    def nothing_relevant(self) -> bool:
        """No hit, and the index is complete: the vault lacks it. While a first pass runs
        an empty answer only means "not indexed yet", which `indexing` says instead."""
        return not self.hits and self.indexing is None


@dataclass(frozen=True)
class NoteRef:
    id: str | None
    title: str
    path: str | None


@dataclass(frozen=True)
class NoteSummary:
    id: str
    title: str
    path: str
    summary: str
    updated: str | None


@dataclass(frozen=True)
class NotePage:
    notes: list[NoteSummary]
    next_cursor: str | None
    indexing: Indexing | None = None  # a first pass is running: the list may be incomplete


@dataclass(frozen=True)
class NoteView:
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


@dataclass(frozen=True)
class SaveResult:
    id: str
    path: str
    version: str
    duplicate_of: str | None = None
    indexed: bool = True  # False: the file is written, the index catches up later


@dataclass(frozen=True)
class Trashed:
    id: str  # the note's id (whatever name the caller gave)
    path: str  # where the note was
    trashed_to: str  # where it is now, in the vault's .trash/


@dataclass(frozen=True)
class Status:
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
