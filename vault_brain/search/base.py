"""What the pieces of the search pipeline hand each other."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from vault_brain.index.port import Reads
from vault_brain.index.records import ChunkHit, Filters

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor


class LazyPool:
    """A thread pool made on its first task: a one-shot full-text search never needs one,
    nor the import of concurrent.futures (and logging) it costs (~2 CPU-ms)."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
            return self._pool.submit(fn, *args)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class NoteHit:
    note_rowid: int
    chunk_rowid: int  # the chunk that gives the snippet
    score: float  # the arm's own score (the store's text rank, a cosine) or the fused one


@dataclass(frozen=True)
class Request:
    query: str
    filters: Filters
    depth: int  # candidate chunks each arm retrieves
    # The query's vectors by the models' light encoders (embed/base.py embed_queries): a
    # CLI search's, so it gets the same bytes from any process that answers it.
    light: bool = False
    # Work an arm began before the others ran (Arm.begin), by arm name: its own to read.
    begun: dict[str, object] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class ArmResult:
    name: str  # "fts" | "vector"
    hits: list[NoteHit]  # best first, one per note
    degraded: str | None = None  # why the arm could not answer; None when it did
    tier: str | None = None  # vector arm: which embedding tier answered
    # Per note in [0, 1] (search/calibration.py): the vector arm's calibrated evidence, the
    # full-text arm's coverage (made evidence once it is known whether vectors decide).
    evidence: dict[int, float] = field(default_factory=dict)
    calibrated: bool = False  # vector arm: its model's cosine scale is measured


class Arm(Protocol):
    """A retrieval arm. It may also have `begin(reads, request)`: called before any arm of
    the search retrieves, to start waiting work (a remote query embedding) that overlaps
    the others."""

    name: str

    def retrieve(self, reads: Reads, request: Request) -> ArmResult: ...


def collapse(hits: Sequence[ChunkHit]) -> list[NoteHit]:
    """Best chunk per note, in the order given (best first)."""
    seen: dict[int, NoteHit] = {}
    for h in hits:
        if h.note_rowid not in seen:
            seen[h.note_rowid] = NoteHit(h.note_rowid, h.chunk_rowid, h.score)
    return list(seen.values())
