"""Brain: the one facade that the CLI, the MCP server and the watcher call.

Reads come from the index; writes go to the files first (vault/), then that one file is
synced at once, so a saved note is findable by full text when the call returns."""

from __future__ import annotations

import base64
import json
import secrets as _random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.embed import Embedder, make_embedder
from vault_brain.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unavailable,
)
from vault_brain.index import store
from vault_brain.index.db import Connection, binding_errors, connect, open_index
from vault_brain.index.search import (
    NoteHit,
    collapse,
    fuse_convex,
    fuse_rrf,
    make_snippet,
)
from vault_brain.index.sync import Syncer, SyncReport, text_hash
from vault_brain.index.text import query_terms, search_notes
from vault_brain.index.vectors import VectorMatrix, embed_batch, vectors_ready
from vault_brain.lock import indexer_alive
from vault_brain.summarize import make_summarizer
from vault_brain.vault import writer
from vault_brain.vault.note import UnreadableNote, parse_note
from vault_brain.vault.paths import resolve_folder_path
from vault_brain.vault.render import render_new_note, render_update
from vault_brain.vault.secrets import find_secret

if TYPE_CHECKING:
    from vault_brain.summarize.llm import Summarizer

__all__ = ["Brain", "SyncReport"]

MODES = ("hybrid", "fts", "vector")
BACKOFF_START, BACKOFF_CAP = 30.0, 900.0


@dataclass
class Backoff:
    """When a background kind (vectors, summaries) may call its endpoint again: 30 s after
    a failure, doubling to 15 min; a success resets it. Tests shorten `start`."""

    start: float = BACKOFF_START
    cap: float = BACKOFF_CAP
    delay: float = 0.0
    retry_at: float = 0.0

    def waiting(self) -> bool:
        return time.monotonic() < self.retry_at

    def failed(self) -> float:
        self.delay = min(self.delay * 2 if self.delay else self.start, self.cap)
        self.retry_at = time.monotonic() + self.delay
        return self.delay

    def succeeded(self) -> None:
        self.delay = self.retry_at = 0.0


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    path: str
    summary: str
    snippet: str
    score: float
    updated: str | None


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    mode: str
    degraded: bool
    reason: str | None = None


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


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _encode_cursor(sort_time: str, rowid: int) -> str:
    raw = json.dumps([sort_time, rowid]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sort_time, rowid = json.loads(raw)
        return str(sort_time), int(rowid)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this server gave out") from exc


@dataclass(frozen=True)
class _SummarySource:
    """What a summary is made from, and the exact bytes a write-back is conditional on."""

    title: str
    body: str
    raw: bytes


def _new_id() -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "".join(_random.choice(alphabet) for _ in range(8))


class Brain:
    """The vault, its index and its models, behind one thread-safe object."""

    def __init__(
        self,
        settings: Settings,
        *,
        indexer: bool = True,
        embedder: Embedder | None | str = "auto",
        summarizer: Summarizer | None | str = "auto",
    ) -> None:
        self.settings = settings
        self.root: Path = settings.vault_path
        self.index_path: Path = settings.index_path
        self.indexer = indexer
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[Connection] = []
        self._conn = open_index(self.index_path)  # the write connection, used under the lock
        self.embedder: Embedder | None = (
            make_embedder(settings.embed) if embedder == "auto" else embedder  # type: ignore[arg-type]
        )
        self.summarizer: Summarizer | None = (
            make_summarizer(settings.summary) if summarizer == "auto" else summarizer
        )
        self._matrix = VectorMatrix()
        self._syncer = Syncer(self._conn, settings, summarize=settings.summary.provider != "none")
        self._last_sync = 0.0
        self._synced = threading.Event()  # a full stat pass has completed in this process
        self._live = False
        self.embed_backoff = Backoff()
        self.summary_backoff = Backoff()
        self._closed = False

    # -- connections -----------------------------------------------------------------

    def _reader(self) -> Connection:
        """One read connection per thread: WAL readers never wait for the writer."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.index_path)
            self._local.conn = conn
            with self._write_lock:
                self._readers.append(conn)
        return conn

    def set_indexer(self, indexer: bool, *, live: bool = False) -> None:
        """The watcher promotes this process when it takes the vault's lock (live: it keeps
        the index fresh from file events, so searches need no stat pass of their own)."""
        self.indexer = indexer
        self._live = indexer and live

    # -- sync --------------------------------------------------------------------------

    def sync(
        self, *, full: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> SyncReport:
        """Bring the index in step with the vault: stat pass, hash, re-index what changed."""
        with self._write_lock:
            report = self._syncer.sync_all(full=full, progress=progress)
            self._last_sync = time.monotonic()
        self._synced.set()
        log.event(
            "sync",
            scanned=report.scanned,
            added=report.added,
            updated=report.updated,
            removed=report.removed,
            skipped=report.skipped,
            ms=report.ms,
        )
        return report

    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Re-check these vault-relative paths (files or folders, present or gone)."""
        rels = []
        for p in paths:
            path = Path(p)
            if path.is_absolute():
                try:
                    p = path.resolve().relative_to(self.root).as_posix()
                except ValueError:
                    try:
                        p = path.relative_to(self.root).as_posix()
                    except ValueError:
                        continue
            rels.append(p)
        with self._write_lock:
            report = self._syncer.sync_paths(rels)
        if report.changed:
            log.event(
                "sync_paths",
                paths=len(rels),
                added=report.added,
                updated=report.updated,
                removed=report.removed,
                ms=report.ms,
            )
        return report

    def maybe_sync(self) -> None:
        """Fresh reads without a daemon: a stat pass when the last one is older than the
        configured interval (only in a process that indexes)."""
        if not self.indexer or self._live:
            return
        interval = self.settings.index.fresh_read_seconds
        if time.monotonic() - self._last_sync < interval:
            return
        # A sync already running (the watcher's, a save's) makes the index fresh enough:
        # a search never waits behind it.
        if not self._write_lock.acquire(blocking=False):
            return
        try:
            self.sync()
        finally:
            self._write_lock.release()

    def wait_until_indexed(self, timeout: float) -> bool:
        """A brand-new index fills in the background (a server answers `initialize` at
        once); its first reads wait for it, bounded, rather than answer "nothing found".
        True as soon as the index holds notes or a stat pass has completed."""
        deadline = time.monotonic() + timeout
        while not (self._synced.is_set() or store.has_notes(self._reader())):
            if time.monotonic() >= deadline:
                return False
            self._synced.wait(0.1)
        return True

    def refresh_if_unwatched(self) -> bool:
        """Fresh reads without a daemon: when no watcher or server indexes this vault (its
        indexer lock is free), bring the index in step now (stat pass, then vectors).
        Returns True when it did."""
        from vault_brain.lock import IndexerLock, indexer_lock_path

        lock = IndexerLock(indexer_lock_path(self.settings))
        if not lock.try_acquire():
            return False
        try:
            self.sync()
            self.embed_pending()
        finally:
            lock.release()
        return True

    def start_watching(self) -> Callable[[], None]:
        """Keep the index in step with the files from background threads: a watchdog
        observer when this process can take the vault's indexer lock, else a reader that
        takes over when the indexer goes away. Returns the function that stops it."""
        from vault_brain.watch import Watcher

        watcher = Watcher(self, self.settings)
        watcher.start()
        return watcher.stop

    # -- vectors -----------------------------------------------------------------------

    def embed_pending(self, *, limit: int | None = None) -> int:
        """Catch vectors up; returns how many were written. An endpoint that fails is backed
        off (30 s doubling to 15 min) and reported in status; it never raises."""
        if self.embedder is None or self.embed_backoff.waiting():
            return 0
        written = 0
        batch = self.settings.embed.batch_size * max(1, self.settings.embed.concurrency) * 4
        try:
            while limit is None or written < limit:
                n = embed_batch(self._conn, self.embedder, self._write_lock, batch)
                if n == 0:
                    break
                written += n
        except (Unavailable, OSError, ValueError, RuntimeError) as exc:
            self._background_failed("embed", self.embed_backoff, exc)
            return written
        self._background_succeeded("embed", self.embed_backoff)
        return written

    # -- summaries ---------------------------------------------------------------------

    def summarize_pending(self, *, limit: int | None = None) -> int:
        """Catch LLM summaries up for notes whose frontmatter has none; returns how many
        notes left the queue. Same back-off as vectors; never raises.

        A summary describes the version it was made from: it is stored only while the index
        still holds that version, and with summary.write_back it goes into the file only as
        a conditional write on that version, never over a newer edit."""
        if self.summarizer is None or self.summary_backoff.waiting():
            return 0
        self._queue_for_new_summarizer()
        done, after = 0, 0
        failure: Exception | None = None
        workers = max(1, self.summarizer.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="summary") as pool:
            while limit is None or done < limit:
                size = workers * 2 if limit is None else min(workers * 2, limit - done)
                batch = store.pending_summaries(self._reader(), after, size)
                if not batch:
                    break
                after = batch[-1].rowid
                notes = [self._summary_source(p) for p in batch]
                jobs = [(p, n) for p, n in zip(batch, notes, strict=True) if n is not None]
                summarize = self.summarizer.summarize
                futures = [pool.submit(summarize, n.title, n.body) for _, n in jobs]
                answered = 0
                for (pending, note), future in zip(jobs, futures, strict=True):
                    try:
                        summary = future.result()
                    except (Unavailable, OSError, ValueError, RuntimeError) as exc:
                        failure = failure or exc
                        continue
                    answered += 1
                    done += self._keep_summary(pending, note.raw, summary)
                if jobs and not answered:
                    break  # the endpoint is down or wrong: stop here, keep what is done
                # Some answered: the endpoint works, so one note's failure does not stop the
                # pass; that note is retried after the back-off.
        if failure is not None:
            self._background_failed("summary", self.summary_backoff, failure)
        else:
            self._background_succeeded("summary", self.summary_backoff)
        return done

    def _queue_for_new_summarizer(self) -> None:
        """Summaries just turned on, or another model: queue every note without a
        frontmatter summary (older LLM summaries serve until the new ones arrive)."""
        name = self.summarizer.name if self.summarizer else None
        if name is None or store.get_meta(self._reader(), "summary_model") == name:
            return
        with self._write_lock:
            queued = store.queue_all_summaries(self._conn)
            store.set_meta(self._conn, "summary_model", name)
        if queued:
            log.event("summaries_queued", model=name, notes=queued)

    def _summary_source(self, pending: store.PendingSummary) -> _SummarySource | None:
        """The note as the index knows it, or None when the file moved on (then it is
        synced, which re-queues or drops it)."""
        try:
            raw = (self.root / pending.path).read_bytes()
            note = parse_note(pending.path, raw)
        except (OSError, UnreadableNote):
            self.sync_paths([pending.path])
            return None
        if note.version != pending.version:
            self.sync_paths([pending.path])
            return None
        return _SummarySource(pending.title, note.body, raw)

    def _keep_summary(self, pending: store.PendingSummary, raw: bytes, summary: str) -> int:
        """Write the summary back into the note (when configured) or store it in the index;
        1 when the note left the queue, 0 when it changed meanwhile."""
        if self._may_write_back(pending.path):
            with self._write_lock:
                try:
                    new = render_update(raw, summary=summary, now=_now())
                    writer.replace_note_file(
                        self.root,
                        pending.path,
                        pending.version,
                        new,
                        allowed_folders=self.settings.write.allowed_folders,
                    )
                except (Conflict, NotFound):
                    # Edited or gone since we read it: drop this summary; the sync re-queues.
                    log.event("summary_dropped", path=pending.path, reason="changed")
                    self._syncer.sync_paths([pending.path])
                    return 0
                except (InvalidInput, Forbidden, OSError) as exc:
                    # Frontmatter we cannot edit safely: keep the summary in the index only.
                    log.warn(
                        "summary_write_back_skipped", path=pending.path, error=type(exc).__name__
                    )
                else:
                    self._syncer.sync_paths([pending.path])
                    log.event("summary_written", path=pending.path)
                    return 1
        with self._write_lock:
            model = self.summarizer.name if self.summarizer else ""
            stored = store.set_llm_summary(
                self._conn, pending.rowid, pending.version, summary, model
            )
        return 1 if stored else 0

    def _may_write_back(self, rel: str) -> bool:
        w = self.settings.write
        if not self.settings.summary.write_back or w.read_only:
            return False
        folders = [f.strip("/") for f in w.allowed_folders if f.strip("/")]
        return not folders or any(rel.startswith(f + "/") for f in folders)

    # -- background errors -------------------------------------------------------------

    def _background_failed(self, kind: str, backoff: Backoff, exc: Exception) -> None:
        """Back off and record the error in the index, where status in any process sees it."""
        message = f"{exc.__class__.__name__}: {exc}"[:300]
        delay = backoff.failed()
        log.warn(f"{kind}_failed", error=message, retry_in_s=delay)
        record = json.dumps({"message": message, "at": time.time()})
        try:
            with self._write_lock:
                store.set_meta(self._conn, f"{kind}_error", record)
        except binding_errors() as db_exc:
            log.warn("error_not_recorded", kind=kind, error=type(db_exc).__name__)

    def _background_succeeded(self, kind: str, backoff: Backoff) -> None:
        backoff.succeeded()
        try:
            if store.get_meta(self._reader(), f"{kind}_error") is not None:
                with self._write_lock:
                    store.set_meta(self._conn, f"{kind}_error", None)
        except binding_errors() as db_exc:
            log.warn("error_not_cleared", kind=kind, error=type(db_exc).__name__)

    def _recorded_error(self, conn: Connection, kind: str) -> tuple[float, str] | None:
        raw = store.get_meta(conn, f"{kind}_error")
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return float(record["at"]), str(record["message"])
        except (ValueError, TypeError, KeyError):
            return 0.0, raw

    # -- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        mode: str | None = None,
        tags: Sequence[str] = (),
        folder: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> SearchResult:
        started = time.perf_counter()
        s = self.settings.search
        mode = mode or s.mode
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
        limit = limit or s.limit
        if not query or not query.strip():
            raise InvalidInput("query is empty")
        self.maybe_sync()
        conn = self._reader()
        filters = store.Filters(tuple(tags), folder or None, since or None, until or None)
        depth = max(limit * 5, 50)
        fts: list[NoteHit] = []
        vec: list[NoteHit] = []
        degraded, reason = False, None
        if mode in ("hybrid", "fts"):
            fts = search_notes(conn, query, filters, depth, self.settings.text.note_weight)
        if mode in ("hybrid", "vector"):
            vec, reason = self._vector_arm(conn, query, filters, depth)
            degraded = reason is not None
            if degraded and mode == "vector":
                fts = search_notes(conn, query, filters, depth, self.settings.text.note_weight)
        if vec and fts:
            if s.fusion == "rrf":
                fused = fuse_rrf(fts, vec, s.rrf_k, s.vector_weight)
            else:
                fused = fuse_convex(fts, vec, s.vector_weight)
        else:
            fused = list(fts or vec)
        hits = self._hits(conn, fused[:limit], query)
        log.event(
            "search",
            mode=mode,
            results=len(hits),
            degraded=degraded,
            query=log.cut(query),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return SearchResult(hits, mode, degraded, reason)

    def _vector_arm(
        self, conn: Connection, query: str, filters: store.Filters, depth: int
    ) -> tuple[list[NoteHit], str | None]:
        if self.embedder is None:
            return [], "no embedding provider configured"
        if not vectors_ready(conn, self.embedder):
            return [], "vectors are not built yet"
        if self.embed_backoff.waiting():
            # The background queue saw the endpoint fail: no search waits on it meanwhile.
            return [], "embedding endpoint unavailable; retrying in the background"
        try:
            vector = self.embedder.embed([query])[0]
        except (Unavailable, OSError, ValueError, RuntimeError) as exc:
            self.embed_backoff.failed()
            return [], f"embedding failed: {exc}"[:200]
        if str(len(vector)) != store.get_meta(conn, "embed_dim"):
            return [], "embedding dimension changed; vectors are being rebuilt"
        if not np.any(vector):
            return [], None  # the model knows none of the query's words (another script)
        model = self.embedder.name
        hits = collapse(self._matrix.search(conn, model, vector, filters, depth * 3))
        return hits, None

    def _hits(self, conn: Connection, fused: Sequence[NoteHit], query: str) -> list[Hit]:
        infos = store.notes_by_rowids(conn, [h.note_rowid for h in fused])
        texts = store.chunk_texts(conn, [h.chunk_rowid for h in fused])
        terms = query_terms(query)
        out = []
        for h in fused:
            info = infos.get(h.note_rowid)
            if info is None:
                continue
            _, text = texts.get(h.chunk_rowid, ("", ""))
            out.append(
                Hit(
                    info.id,
                    info.title,
                    info.path,
                    info.summary,
                    make_snippet(text, terms),
                    round(h.score, 4),
                    info.updated,
                )
            )
        return out

    # -- reading -----------------------------------------------------------------------

    def _find(self, conn: Connection, ref: str) -> store.NoteInfo:
        ref = (ref or "").strip()
        if not ref:
            raise InvalidInput("id is empty")
        info = store.note_by_id(conn, ref)
        if info is None:
            path = ref.lstrip("/")
            info = store.note_by_path(conn, path)
            if info is None and not path.lower().endswith(".md"):
                info = store.note_by_path(conn, path + ".md")
        if info is None:
            raise NotFound(f"no note with id or path {ref!r}")
        return info

    def get(self, ref: str, *, max_chars: int | None = None) -> NoteView:
        conn = self._reader()
        info = self._find(conn, ref)
        try:
            raw = (self.root / info.path).read_bytes()
            note = parse_note(info.path, raw)
        except FileNotFoundError as exc:
            self.sync_paths([info.path])
            raise NotFound(f"{info.path} is no longer in the vault") from exc
        except (OSError, UnreadableNote) as exc:
            raise Unavailable(f"{info.path} cannot be read: {exc}") from exc
        content = note.body
        truncated = max_chars is not None and len(content) > max_chars
        if truncated:
            content = content[:max_chars]
        links_out: list[NoteRef] = []
        seen: set[str] = set()
        for link in note.links:
            key = link.target.lower()
            if key in seen:
                continue
            seen.add(key)
            target = store.resolve_link(conn, link.target)
            if target is None:
                links_out.append(NoteRef(None, link.target, None))
            else:
                links_out.append(NoteRef(target.id, target.title, target.path))
        backlinks = []
        sources = store.notes_by_rowids(conn, store.backlink_rowids(conn, info))
        for src in sorted(sources.values(), key=lambda n: n.path):
            links = store.note_links(conn, src.rowid)
            if any(
                (t := store.resolve_link(conn, ln.target)) and t.rowid == info.rowid for ln in links
            ):
                backlinks.append(NoteRef(src.id, src.title, src.path))
        return NoteView(
            id=info.id,
            title=note.title,
            path=info.path,
            summary=info.summary,
            tags=list(note.tags),
            aliases=list(note.aliases),
            created=note.created,
            updated=note.updated or info.updated,
            version=note.version,
            content=content,
            truncated=truncated,
            links_out=links_out,
            backlinks=backlinks,
        )

    def list(
        self,
        *,
        folder: str | None = None,
        tag: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> NotePage:
        conn = self._reader()
        filters = store.Filters(tuple([tag] if tag else ()), folder or None)
        after = _decode_cursor(cursor) if cursor else None
        rows = store.list_notes(conn, filters, limit + 1, after)
        more = len(rows) > limit
        rows = rows[:limit]
        notes = [NoteSummary(r.id, r.title, r.path, r.summary, r.updated) for r in rows]
        next_cursor = _encode_cursor(rows[-1].sort_time, rows[-1].rowid) if more else None
        return NotePage(notes, next_cursor)

    def status(self) -> Status:
        conn = self._reader()
        c = store.counts(conn)
        model = store.get_meta(conn, "embed_model")
        dim = store.get_meta(conn, "embed_dim")
        size = sum(
            p.stat().st_size
            for p in (self.index_path, Path(f"{self.index_path}-wal"))
            if p.exists()
        )
        ready = vectors_ready(conn, self.embedder)
        # Another model's vectors do not count: every chunk waits for this one's.
        pending = (c["pending_vectors"] if ready else c["chunks"]) if self.embedder else 0
        # Errors live in the index, so a `status` in another process sees the watcher's.
        errors = {kind: self._recorded_error(conn, kind) for kind in ("embed", "summary")}
        if self.embedder is None:
            errors["embed"] = None
        if self.summarizer is None:
            errors["summary"] = None
        latest = max((e for e in errors.values() if e), default=None)
        return Status(
            vault=str(self.root),
            index_path=str(self.index_path),
            notes=c["notes"],
            chunks=c["chunks"],
            vectors=c["vectors"] if ready else 0,
            pending_vectors=pending,
            pending_summaries=c["pending_summaries"] if self.summarizer else 0,
            embedding=self.embedder.name if self.embedder else None,
            dimension=int(dim) if dim and model == getattr(self.embedder, "name", None) else None,
            index_bytes=size,
            indexer=self.indexer,
            watched=self._live or indexer_alive(self.settings),
            last_error=latest[1] if latest else None,
            embed_error=errors["embed"][1] if errors["embed"] else None,
            summary_error=errors["summary"][1] if errors["summary"] else None,
            summary_model=self.summarizer.name if self.summarizer else None,
        )

    def snapshot(self) -> dict[str, list[tuple]]:
        """What a full reindex must reproduce (tests compare two of these)."""
        return store.snapshot(self._reader())

    # -- writing -----------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.settings.write.read_only:
            raise Forbidden("this brain is read-only (write.read_only = true)")

    def _check_text(self, field: str, value: str | None, cap: int) -> None:
        if value is None:
            return
        if not isinstance(value, str):
            raise InvalidInput(f"{field} must be text")
        if len(value) > cap:
            raise InvalidInput(f"{field} is longer than {cap} characters")
        if self.settings.write.reject_secrets:
            kind = find_secret(value)
            if kind:
                raise InvalidInput(
                    f"{field} looks like it holds a credential ({kind}); notes must not "
                    "store secrets"
                )

    def _check_tags(self, tags: Sequence[str] | None) -> list[str] | None:
        if tags is None:
            return None
        if len(tags) > 32:
            raise InvalidInput("at most 32 tags")
        out = []
        for t in tags:
            t = str(t).strip().lstrip("#")
            if not t or len(t) > 64 or any(ch.isspace() for ch in t):
                raise InvalidInput(f"tag {t!r} must be 1-64 characters without spaces")
            out.append(t)
        return out

    def save(
        self,
        title: str,
        content: str,
        *,
        summary: str | None = None,
        tags: Sequence[str] = (),
        folder: str | None = None,
    ) -> SaveResult:
        self._check_writable()
        title = (title or "").strip()
        if not title:
            raise InvalidInput("title is empty")
        cap = self.settings.write.max_content_chars
        self._check_text("title", title, 300)
        self._check_text("content", content, cap)
        self._check_text("summary", summary, 1000)
        clean_tags = self._check_tags(tags) or []
        allowed = self.settings.write.allowed_folders
        # With allowed_folders set, a save with no folder goes to the first of them.
        target = folder or (allowed[0] if allowed else "")
        resolve_folder_path(self.root, target, allowed_folders=allowed)  # Forbidden early
        conn = self._reader()
        same = store.note_with_body(conn, text_hash((content or "").strip()))
        if same is not None and (content or "").strip():
            return SaveResult(same.id, same.path, same.version, duplicate_of=same.id)
        with self._write_lock:
            note_id = _new_id()
            while store.note_by_id(self._conn, note_id) is not None:
                note_id = _new_id()
            data = render_new_note(
                id=note_id,
                title=title,
                content=content or "",
                summary=summary or "",
                tags=clean_tags,
                now=_now(),
            )
            rel = writer.create_note_file(self.root, target, title, data, allowed)
            self._syncer.sync_paths([rel])
        info = store.note_by_path(self._reader(), rel)
        version = info.version if info else ""
        log.event("save", id=note_id, path=rel)
        return SaveResult(info.id if info else note_id, rel, version)

    def update(
        self,
        ref: str,
        version: str,
        *,
        content: str | None = None,
        append: str | None = None,
        summary: str | None = None,
        tags: Sequence[str] | None = None,
        title: str | None = None,
    ) -> SaveResult:
        self._check_writable()
        if not version:
            raise InvalidInput("version is required: get the note first")
        if content is not None and append is not None:
            raise InvalidInput("give content (replace) or append, not both")
        if all(v is None for v in (content, append, summary, tags, title)):
            raise InvalidInput("nothing to update")
        cap = self.settings.write.max_content_chars
        self._check_text("content", content, cap)
        self._check_text("append", append, cap)
        self._check_text("summary", summary, 1000)
        self._check_text("title", title, 300)
        if title is not None and not title.strip():
            raise InvalidInput("title is empty")
        clean_tags = self._check_tags(tags)
        info = self._find(self._reader(), ref)
        with self._write_lock:
            path = self.root / info.path
            try:
                raw = path.read_bytes()
            except FileNotFoundError as exc:
                self._syncer.sync_paths([info.path])
                raise NotFound(f"{info.path} is no longer in the vault") from exc
            new = render_update(
                raw,
                content=content,
                append=append,
                summary=summary,
                tags=clean_tags,
                title=title.strip() if title else None,
                now=_now(),
                id=info.id,
            )
            new_version = writer.replace_note_file(
                self.root,
                info.path,
                version,
                new,
                allowed_folders=self.settings.write.allowed_folders,
            )
            self._syncer.sync_paths([info.path])
        log.event("update", id=info.id, path=info.path)
        return SaveResult(info.id, info.path, new_version)

    def delete(self, ref: str, version: str) -> str:
        self._check_writable()
        if not version:
            raise InvalidInput("version is required: get the note first")
        info = self._find(self._reader(), ref)
        with self._write_lock:
            trashed = writer.trash_note_file(
                self.root,
                info.path,
                version,
                allowed_folders=self.settings.write.allowed_folders,
            )
            self._syncer.sync_paths([info.path])
        log.event("delete", id=info.id, path=info.path, trashed_to=trashed)
        return trashed

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._write_lock:
            for conn in [*self._readers, self._conn]:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
            self._readers.clear()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
