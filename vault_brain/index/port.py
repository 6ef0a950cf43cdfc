"""The index as the rest of vault-brain sees it: a port that any store can fill.

Each client of the index asks a few named questions; each such set is a small protocol
below, named for its role (what sync needs, what each search arm needs, what the vector and
summary queues need, what Brain's lookups and status need). `Index` hands them out: `read()`
gives every read role on one consistent snapshot, `transaction()` every role on one write
transaction. A client annotates with the role it uses, so what a store must answer for
whom is written down here and nowhere else.

Everything crossing the port is a plain record of index/records.py (or str, int, bytes):
no SQL, no connection, no table name. A backend is a package beside this one (index/sqlite/)
that index/factory.py opens by the `index.url` it is given. Notes and chunks are known by
the integer keys the backend gives them (`NoteInfo.rowid`, `ChunkHit.chunk_rowid`), stable
while they stay indexed; a listing's cursor is an opaque string the backend makes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from vault_brain.index.records import (
    ChunkHit,
    ChunkRow,
    Counts,
    Filters,
    Holder,
    LeadsFirst,
    LinkInfo,
    LinkRow,
    NoteInfo,
    NoteRow,
    PendingChunk,
    PendingSummary,
    StoredStat,
    TextQuery,
    TextRanking,
    VectorHits,
)

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
# How long a write waits for another writer's hold on the same note (vault/locks.py's too).
NOTE_LOCK_SECONDS = 10.0

# --- what each client asks ---------------------------------------------------------------


class Meta(Protocol):
    """Small named values the index keeps for its clients (the analyser that wrote its
    text, a pass's progress, the last failure of a background kind, the vault's fitted
    calibration)."""

    def get_meta(self, key: str) -> str | None: ...

    def parsed_meta(self, key: str, parse: Callable[[str | None], T]) -> T:
        """parse(get_meta(key)), remembered until the index changes: what a search asks
        each time (one `parse` per key)."""
        ...


class MetaWrites(Meta, Protocol):
    def set_meta(self, key: str, value: str | None) -> None:
        """Set `key` (None: remove it)."""
        ...


class SyncReads(Meta, Protocol):
    """What index/sync.py reads to decide which files changed and who holds which id."""

    def load_stats(self) -> dict[str, StoredStat]:
        """Every indexed note's stat, by vault path."""
        ...

    def note_stats(self) -> list[tuple[str, int, int]]:
        """Every indexed note's (path, mtime_ns, size) in code-point order of the path (the
        order of `sorted`): a pass that finds the vault as stored compares two lists."""
        ...

    def load_stats_under(self, rel: str) -> dict[str, StoredStat]:
        """The note at `rel` and every note below it (a folder)."""
        ...

    def load_stat(self, path: str) -> StoredStat | None: ...

    def id_holder(self, note_id: str) -> str | None:
        """The path of the note that holds this id."""
        ...

    def id_of(self, path: str) -> str | None: ...

    def first_claimant(self, note_id: str) -> str | None:
        """The path, first in path order, of a note whose file asks for this id."""
        ...

    def keys_of(self, rowid: int) -> set[str]:
        """The link keys that can reach this note now (records.link_keys)."""
        ...


class SyncWrites(SyncReads, MetaWrites, Protocol):
    """What index/sync.py writes: whole notes, ids, and the links that resolve to them."""

    def touch_note(self, rowid: int, mtime_ns: int, size: int, mtime_iso: str) -> None:
        """Same bytes, new stat (a note without a date sorts by its new mtime)."""
        ...

    def set_note_id(self, path: str, note_id: str) -> None: ...

    def upsert_note(
        self,
        note: NoteRow,
        chunks: Sequence[ChunkRow],
        tags: Iterable[str],
        links: Sequence[LinkRow],
    ) -> int:
        """Replace everything stored for note.path (text, chunks, tags, links; its vectors
        go); returns its key. Links are left unresolved until resolve_links."""
        ...

    def chunk_keys(self, rowid: int) -> list[int]:
        """The keys of the note's chunks, in their order (ordinal)."""
        ...

    def delete_note(self, rowid: int) -> None:
        """The note and everything of it gone; remembered a while so that a move (a
        removal and an addition with the same bytes) keeps its old id as a redirect."""
        ...

    def redirect_moved(self, note_id: str, content_hash: str) -> None:
        """A note just added with the bytes of one removed lately was moved: its old id
        now leads here."""
        ...

    def clear_notes(self) -> None:
        """Every note, chunk, link and vector gone, caches kept (a full rebuild)."""
        ...

    def put_off_indexes(self) -> None:
        """A first index of many notes begins (the index holds none): the backend may put
        off building indexes nothing reads while notes are stored, until make_indexes."""
        ...

    def make_indexes(self) -> None:
        """The indexes put off, built now (a first index's last transaction)."""
        ...

    def resolve_links(self, keys: Iterable[str], note_rowids: Iterable[int] = ()) -> int:
        """Re-resolve every link whose target is one of `keys`, and every link of these
        notes; returns how many changed."""
        ...

    def resolve_every_link(self) -> int: ...


class TextSearch(Protocol):
    """The full-text arm's one question, and what it needs to analyse a query."""

    def vault_languages(self) -> tuple[tuple[str, ...], str | None]:
        """The languages the notes were analysed in (most notes first, then the configured
        ones) and the main one: a query is analysed in all of them."""
        ...

    def rank_text(
        self, query: TextQuery, filters: Filters, *, notes: int, note_weight: float, evidence: int
    ) -> TextRanking:
        """The best `notes` notes for an analysed query within the filters, best first,
        each with its best chunk and a score that mixes its best chunk's rank with its
        whole text's (`note_weight` of the latter, 0: chunks alone); for the best
        `evidence` of them the query's groups their whole text holds, and for the query the
        note count and each group's document frequency (the calibration's evidence)."""
        ...


class VectorSearch(Meta, Protocol):
    """The vector arm's one question, which tier can answer it, and (Meta) the vault's
    fitted calibration."""

    def vault_languages(self) -> tuple[tuple[str, ...], str | None]:
        """As TextSearch's: the main language is the calibration's guess for a question
        whose own words do not say which language it is in."""
        ...

    def vectors_model(self, tier: str = "instant") -> tuple[str, int] | None:
        """(model, dimension) of the vectors the tier holds, or None."""
        ...

    def strong_covers(self, share: float) -> bool:
        """True when the strong tier has vectors for at least `share` of the chunks."""
        ...

    def nearest_chunks(
        self,
        model: str,
        vector: np.ndarray,
        filters: Filters,
        *,
        k: int,
        tier: str = "instant",
        noise: bool = True,
    ) -> VectorHits:
        """The k chunks nearest to `vector` (cosine) among the tier's vectors of `model`
        within the filters, best first; with `noise`, the query's median cosine and its
        robust spread over every chunk (else 0, 0)."""
        ...

    def nearest_chunk_each(
        self, model: str, vectors: np.ndarray, *, tier: str = "instant"
    ) -> list[ChunkHit | None]:
        """The nearest chunk to each row of `vectors`, or None where there is none: the
        chunk and score nearest_chunks(k=1, no filters, no noise) gives that row alone, to
        the bit. The vault's calibration asks ~440 questions at once (search/fit.py); one
        pass over the vectors answers them for a fraction of 440 searches' price."""
        ...


class Hydration(Protocol):
    """What the search pipeline reads to turn ranked keys into hits."""

    def notes_by_rowids(self, rowids: Sequence[int]) -> dict[int, NoteInfo]: ...

    def chunk_texts(self, chunk_rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """(heading path, text) of each chunk."""
        ...


class VectorQueueReads(Protocol):
    """What index/vectors.py reads: the tier's model, its pending chunks, cached vectors."""

    def vectors_model(self, tier: str = "instant") -> tuple[str, int] | None: ...

    def pending_chunks(
        self, limit: int, tier: str = "instant", *, leads: LeadsFirst | None = None
    ) -> list[PendingChunk]:
        """Chunks waiting for the tier's vectors (the strong tier: newest first). With
        `leads`, the notes' lead chunks (ordinal 0) past `leads.past` come first, marked
        `lead`, then chunks that are no lead, each part in the tier's order."""
        ...

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
        """float32 bytes of the vectors `model` made before for these text hashes."""
        ...


class VectorQueueWrites(VectorQueueReads, Protocol):
    def reset_vectors(self, model: str, dim: int, tier: str = "instant") -> None:
        """A new model for the tier: its old vectors go, every chunk is queued again."""
        ...

    def store_vectors(
        self,
        model: str,
        items: Sequence[tuple[int, str, bytes]],
        tier: str = "instant",
        *,
        cache: bool = True,
    ) -> int:
        """items: (chunk key, text hash, float32 bytes); only chunks still pending with that
        text are attached. Returns how many were. `cache=False`: the caller puts them in the
        embedding cache itself, later (cache_vectors)."""
        ...

    def cache_vectors(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        """(text hash, float32 bytes) into the embedding cache; a later one of a hash wins."""
        ...


class SummaryReads(Meta, Protocol):
    """What summarize/queue.py reads."""

    def pending_summaries(self, after: int, limit: int) -> list[PendingSummary]:
        """Notes waiting for an LLM summary, in key order after the key `after` (0: from
        the start), so one pass never meets a note twice."""
        ...


class SummaryWrites(SummaryReads, MetaWrites, Protocol):
    def set_llm_summary(self, rowid: int, version: str, summary: str, model: str = "") -> bool:
        """Store a summary of `version` of the note; False when it changed meanwhile."""
        ...

    def queue_all_summaries(self) -> int:
        """Queue every note without a frontmatter summary (a new summarizer)."""
        ...


class Lookup(Meta, Protocol):
    """What service.Brain and the Indexer read: notes by what a model calls them, links,
    listings, counts."""

    def note_by_id(self, note_id: str) -> NoteInfo | None: ...

    def note_by_path(self, path: str) -> NoteInfo | None:
        """The exact path, then any case."""
        ...

    def notes_by_title(self, title: str, limit: int) -> list[NoteInfo]:
        """Notes with exactly this title, any case (several may share it), at most
        `limit`, the shortest path first."""
        ...

    def notes_by_alias(self, alias: str, limit: int) -> list[NoteInfo]:
        """Notes with this alias, any case, the shortest path first."""
        ...

    def notes_by_stem(self, stem: str, limit: int) -> list[NoteInfo]:
        """Notes with this file name (without its folder and .md), anywhere in the vault,
        the shortest path first."""
        ...

    def redirect(self, old_id: str) -> str | None:
        """The id a moved note has now, if `old_id` was its id before the move."""
        ...

    def names(self) -> list[tuple[str, int]]:
        """(title or alias, note key) of every note: candidates for "did you mean"."""
        ...

    def folders(self) -> list[str]:
        """Every folder that holds notes, with its parents."""
        ...

    def folder_exists(self, folder: str) -> bool:
        """Some note lies in this folder or below it (any case)."""
        ...

    def notes_by_rowids(self, rowids: Sequence[int]) -> dict[int, NoteInfo]: ...

    def note_with_body(self, body_hash: str) -> NoteInfo | None: ...

    def links_of(self, rowid: int) -> list[LinkInfo]:
        """A note's outgoing links in order, each with the note it resolves to."""
        ...

    def backlinks(self, rowid: int) -> list[NoteInfo]:
        """Notes that link to this one, by path."""
        ...

    def related(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[NoteInfo]:
        """Up to `limit` notes a reader of this one may want next (memory_get's `related`),
        best first, never the note itself nor one note twice:

        1. link neighbours: the notes its links resolve to, in the order it links them,
           then the notes that link to it, by path;
        2. then the nearest notes by vector: each note's mean chunk vector (unit length)
           against this note's, by cosine. The first of `tiers` that holds vectors of
           this note answers; with none (no vectors yet, or `tiers` empty) the links alone.

        A store answers it in one read, without an embedding model. Where it holds no
        note means, it may rank notes by their best chunk against this note's mean (a
        chunk KNN index; SQLite's one-shot processes do)."""
        ...

    def list_notes(
        self, filters: Filters, limit: int, after: str | None = None
    ) -> tuple[list[NoteInfo], str | None]:
        """Notes newest first (sort time), a page at a time: the page after the cursor
        `after`, and the cursor of the next page (None: this is the last). A cursor this
        index did not give out is InvalidInput."""
        ...

    def has_notes(self) -> bool: ...

    def counts(self) -> Counts: ...

    def note_languages(self) -> dict[str, int]:
        """How many notes were analysed in each language."""
        ...

    def vectors_model(self, tier: str = "instant") -> tuple[str, int] | None: ...

    def strong_backlog(self, at_most: int) -> int:
        """Chunks without a strong vector, counted no further than at_most + 1."""
        ...

    def snapshot(self) -> dict[str, list[tuple]]:
        """Everything a full reindex must reproduce, comparable (tests compare two)."""
        ...


class Reads(
    Lookup, SyncReads, TextSearch, VectorSearch, Hydration, VectorQueueReads, SummaryReads, Protocol
):
    """Every read role, on one consistent snapshot of the index."""


class Writes(Reads, SyncWrites, VectorQueueWrites, SummaryWrites, Protocol):
    """Every role, inside one write transaction."""


# --- the index itself ----------------------------------------------------------------------


class RoleLock(Protocol):
    """One indexer per vault, across processes (and, for a server, across hosts): held while
    this process indexes, given up on release or when the process dies, so a waiting
    process takes over. Not tied to a thread."""

    @property
    def where(self) -> str:
        """What log lines name it by (a lock file's path, a server's lock key)."""
        ...

    @property
    def held(self) -> bool:
        """This process holds it."""
        ...

    def try_acquire(self, role: str | None = None) -> bool:
        """Take it if it is free, without waiting; True when this process holds it now.
        `role` (records.WATCH, INDEX, REFRESH) is recorded for other processes to read
        (holder()). Raises Unavailable when it cannot even be asked for."""
        ...

    def release(self) -> None: ...

    def taken(self) -> bool:
        """Some process (maybe this one) holds it right now."""
        ...

    def holder(self) -> Holder | None:
        """Who holds it (maybe this process) and in what role, or None when nobody does;
        Holder(None, None) when the holder did not say."""
        ...


class Index(Protocol):
    """One vault's index in one store."""

    @property
    def location(self) -> str:
        """Where it lives, as `status` shows it (a file path; a server URL without its
        password)."""
        ...

    @property
    def folder(self) -> Path | None:
        """The local folder the backend writes its files in, which the watcher leaves
        alone; None when it writes none."""
        ...

    @property
    def indexer_lock(self) -> RoleLock: ...

    def note_lock(
        self, path: str, timeout: float = NOTE_LOCK_SECONDS
    ) -> AbstractContextManager[None]:
        """Hold the write lock of the note at vault path `path` (any case, any Unicode
        form of its name) inside the block, for every process that shares this index: a
        write's check of the version its caller read and its rename are then one step for
        all of them. Raises Unavailable (retryable) when another writer holds it for
        `timeout` seconds; dropped when its holder dies.

        The vault's own file lock (vault/locks.py) is taken inside it by every write and
        holds for the processes of one host; a server index (Postgres: an advisory lock)
        holds it on every host, also where the vault's folder is shared without working
        file locks. A SQLite index, which one host alone can share, needs nothing more."""
        ...

    def read(self) -> AbstractContextManager[Reads]:
        """Every read role on one consistent snapshot; never waits for a writer."""
        ...

    def read_elsewhere(self) -> AbstractContextManager[Reads]:
        """A read as `read()` gives, on a connection opened for it alone: a forked child's,
        which must never use its parent's connections. Only where change_mark() is not
        None."""
        ...

    def change_mark(self) -> object | None:
        """A value that stays equal while nobody (no connection of any process) commits
        to the index: equal before and after, every read begun in between saw the same
        data, whichever connection or process read. None when the store cannot say
        (Postgres): no read elsewhere then stands in for one here."""
        ...

    def beside(self, reads: Reads) -> AbstractContextManager[Reads | None]:
        """A second read on the snapshot of `reads` (an open `read()`), for another thread
        to query at the same time, or None: the store cannot share a snapshot between
        connections (SQLite), or has no connection to spare right now. The caller then
        reads in turn on `reads`. Ends before `reads` does."""
        ...

    def transaction(self) -> AbstractContextManager[Writes]:
        """One write transaction, serialised against every other writer; never nested.
        Rolled back when the block raises."""
        ...

    def maintain(self) -> None:
        """Routine chores after writes, called by the indexer's background thread between
        its rounds; cheap and never in a writer's way (SQLite: copy the WAL into the
        database, passively). Raises Unavailable when a chore fails; nothing is lost."""
        ...

    def maintain_in_background(self, on: bool = True) -> None:
        """Say that a background thread calls maintain() after writes (on) or that none
        does any more (off): while one does, commits leave the chores to it."""
        ...

    def repair(self, emptied: Callable[[Writes], None] | None = None) -> bool:
        """Look for damage that reads cannot see and reset what is damaged (SQLite: FTS5's
        integrity check; damaged full-text tables are made anew, empty, or taken out of
        the schema unread when their own pages are damaged). True when something was
        reset: the next pass must index every note again. `emptied` is called inside the
        transaction that empties them (the indexer records there that a rebuild is under
        way, so no reader takes the emptied index for a whole one)."""
        ...

    def size_bytes(self) -> int:
        """What the index takes on disk (0 when the store cannot say)."""
        ...

    def close(self) -> None: ...
