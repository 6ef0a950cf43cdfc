"""Files → index. A stat pass finds candidates, a content hash decides, and only changed
notes are re-parsed and re-chunked. Each note is written in one transaction (batched
with its neighbours), so the index never holds half a note."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG as stat_is_file

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.errors import NotFound, Unavailable
from vault_brain.index import store, text
from vault_brain.index.analysis import frontmatter_language, note_language
from vault_brain.index.chunking import chunk_note
from vault_brain.index.db import Connection
from vault_brain.index.text import fts_text
from vault_brain.vault.note import Note, UnreadableNote, derived_id, parse_note
from vault_brain.vault.scan import FileStat, is_ignored, scan_vault

Progress = Callable[[int, int], None]

PARALLEL_MIN = 400  # files to parse before worker processes pay for their start-up
MAX_WORKERS = 4
BATCH_NOTES = 200  # notes per transaction: each note is whole, commits stay cheap
BATCH_SECONDS = 0.5  # ... and short, so another process's save never waits long


@dataclass
class SyncReport:
    scanned: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    ms: float = 0.0
    changed_paths: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def iso_utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _strip_title(heading_path: str, title: str) -> str:
    prefix = title + " > "
    if heading_path.startswith(prefix):
        return heading_path[len(prefix) :]
    return "" if heading_path == title else heading_path


def build_rows(
    note: Note,
    stat: FileStat,
    settings: Settings,
    summarize: bool,
    frontmatter_lang: str | None = None,
) -> tuple[store.NoteRow, list[store.ChunkRow], list[store.LinkRow]]:
    """Turn a parsed note into the rows the index stores for it. Its full text is analysed
    in its language: `frontmatter_lang` (its `lang:`), else detected, else configured."""
    lang = note_language(f"{note.title}\n\n{note.body}", frontmatter_lang, settings.text.languages)
    folder = posixpath.dirname(note.path)
    stem = posixpath.basename(note.path)
    stem = stem[:-3] if stem.lower().endswith(".md") else stem
    row = store.NoteRow(
        path=note.path,
        id=note.id,
        claimed_id=note.id,
        title=note.title,
        summary=note.summary,
        lead=note.lead,
        created=note.created,
        updated=note.updated,
        sort_time=note.updated or iso_utc(stat.mtime_ns),
        folder=folder,
        stem_key=stem.lower(),
        path_key=(note.path[:-3] if note.path.lower().endswith(".md") else note.path).lower(),
        aliases=tuple(note.aliases),
        mtime_ns=stat.mtime_ns,
        size=stat.size,
        content_hash=note.content_hash,
        body_hash=text_hash(note.body.strip()),
        version=note.version,
        summary_pending=summarize and not note.summary,
        lang=lang,
    )
    c = settings.chunk
    title_text = fts_text(" ".join([note.title, *note.aliases]), lang)
    tag_text = " ".join(note.tags)
    heading_paths: list[str] = []
    chunks = []
    for ch in chunk_note(note.title, note.body, c.max_tokens, c.overlap, c.min_tokens):
        headings = _strip_title(ch.heading_path, note.title)
        heading_paths.append(headings)
        chunks.append(
            store.ChunkRow(
                ordinal=ch.ordinal,
                heading_path=ch.heading_path,
                text=ch.text,
                text_hash=text_hash(f"{ch.heading_path}\n\n{ch.text}"),
                tokens=ch.tokens,
                fts_title=title_text,
                fts_headings=fts_text(f"{headings} {tag_text}".strip(), lang),
                fts_body=fts_text(ch.text, lang),
            )
        )
    # The whole note as one full-text row: evidence spread over chunks counts together.
    headings_text = " ".join(dict.fromkeys(h for h in heading_paths if h))
    row = replace(
        row,
        fts=(
            title_text,
            fts_text(f"{headings_text} {tag_text}".strip(), lang),
            fts_text(note.body, lang),
        ),
    )
    links = [store.LinkRow(ln.target, ln.heading, ln.alias, ln.embed) for ln in note.links]
    return row, chunks, links


class Syncer:
    """Applies file changes to the index through one connection (the caller serialises)."""

    def __init__(self, conn: Connection, settings: Settings, *, summarize: bool = False) -> None:
        self.conn = conn
        self.settings = settings
        self.root = settings.vault_path
        self.summarize = summarize

    # -- entry points ------------------------------------------------------------

    def sync_all(self, *, full: bool = False, progress: Progress | None = None) -> SyncReport:
        started = time.perf_counter()
        v = self.settings.vault
        scan = scan_vault(self.root, v.ignore, v.max_file_bytes)
        for path, reason in scan.skipped:
            log.warn("file_skipped", path=path, reason=reason)
        for folder in scan.unreadable_dirs:
            log.warn("folder_unreadable", path=folder)
        indexed = store.load_stats(self.conn)
        languages = self.settings.text.languages
        reanalyse = text.analyzer_changed(self.conn, languages)  # another analyser: all notes
        report = self._apply(
            {f.path: f for f in scan.files},
            indexed,
            scan.unreadable_dirs,
            full or reanalyse,
            progress,
        )
        if reanalyse:
            text.mark_analyzed(self.conn, languages)
        report.scanned = len(scan.files)
        report.skipped += len(scan.skipped)
        report.ms = round((time.perf_counter() - started) * 1000, 1)
        return report

    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Re-check only these vault-relative paths (files or folders; present or gone)."""
        started = time.perf_counter()
        v = self.settings.vault
        on_disk: dict[str, FileStat] = {}
        indexed: dict[str, store.StoredStat] = {}
        unreadable: list[str] = []
        skipped = 0
        for raw in paths:
            rel = raw.strip("/")
            if not rel or is_ignored(rel, v.ignore):
                continue
            prefix = rel + "/"
            indexed.update(store.load_stats_under(self.conn, rel))
            full = self.root / rel
            try:
                is_dir = full.is_dir()
            except PermissionError:
                unreadable.append(rel)
                continue
            if is_dir:
                try:
                    sub = scan_vault(full, v.ignore, v.max_file_bytes, under=rel)
                except NotFound:  # gone between the check and the scan
                    continue
                except Unavailable:  # cannot be listed: keep what the index holds
                    unreadable.append(rel)
                    continue
                on_disk.update({prefix + f.path: _prefixed(f, prefix) for f in sub.files})
                unreadable += [prefix + d for d in sub.unreadable_dirs]
                skipped += len(sub.skipped)
            elif rel.lower().endswith(".md"):
                try:
                    stat = _stat_file(full, v.max_file_bytes)
                except OSError:  # unreadable, not gone: keep what the index holds
                    unreadable.append(rel)
                    continue
                if stat is not None:
                    on_disk[rel] = FileStat(rel, stat[0], stat[1])
        report = self._apply(on_disk, indexed, unreadable, False, None)
        report.scanned = len(on_disk)
        report.skipped += skipped
        report.ms = round((time.perf_counter() - started) * 1000, 1)
        return report

    # -- the work ------------------------------------------------------------------

    def _apply(
        self,
        on_disk: dict[str, FileStat],
        indexed: dict[str, store.StoredStat],
        unreadable_dirs: list[str],
        full: bool,
        progress: Progress | None,
    ) -> SyncReport:
        report = SyncReport()
        has_vectors = store.has_vector_table(self.conn)
        gone = [
            p
            for p in indexed
            if p not in on_disk
            and not any(p == d or p.startswith(d.rstrip("/") + "/") for d in unreadable_dirs)
        ]
        candidates = [
            f
            for p, f in on_disk.items()
            if full
            or p not in indexed
            or (indexed[p].mtime_ns, indexed[p].size) != (f.mtime_ns, f.size)
        ]
        report.unchanged = len(on_disk) - len(candidates)
        total = len(candidates)
        jobs = [
            (stat, None if full or stat.path not in indexed else indexed[stat.path].content_hash)
            for stat in candidates
        ]
        with _Batch(self.conn) as batch:
            # Deletions first: a moved note frees its id before its new path claims it.
            for path in gone:
                freed = store.id_of(self.conn, path)
                store.delete_note(self.conn, indexed[path].rowid, has_vectors=has_vectors)
                self._release_id(freed)
                report.removed += 1
                report.changed_paths.append(path)
                batch.tick()
            for done, prepared in enumerate(self._prepare_all(jobs), 1):
                self._store(prepared, indexed.get(prepared.stat.path), report, has_vectors)
                batch.tick()
                if progress is not None:
                    progress(done, total)
        return report

    def _prepare_all(self, jobs: list[tuple[FileStat, str | None]]) -> Iterator[Prepared]:
        """Read, parse and chunk: in worker processes when there is a lot of it (parsing is
        CPU-bound Python), in this process otherwise. Results come back in order."""
        workers = min(MAX_WORKERS, os.cpu_count() or 1)
        if len(jobs) < PARALLEL_MIN or workers < 2:
            for stat, known in jobs:
                yield prepare(self.root, stat, known, self.settings, self.summarize)
            return
        context = multiprocessing.get_context("spawn")  # safe beside threads, on every OS
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self.settings, self.summarize),
        ) as pool:
            yield from pool.map(_prepare_in_worker, jobs, chunksize=32)

    def _store(
        self,
        prepared: Prepared,
        known: store.StoredStat | None,
        report: SyncReport,
        has_vectors: bool,
    ) -> None:
        stat = prepared.stat
        if prepared.kind == "unreadable":
            # A transient read error must not drop what the index already holds.
            log.warn("file_unreadable", path=stat.path, error=prepared.reason)
            report.skipped += 1
        elif prepared.kind == "same" and known is not None:
            store.touch_note(self.conn, known.rowid, stat.mtime_ns, stat.size)
            report.unchanged += 1
        elif prepared.kind in ("invalid", "gone"):
            if prepared.kind == "invalid":
                log.warn("file_skipped", path=stat.path, reason=prepared.reason)
                report.skipped += 1
            if known is not None:
                freed = store.id_of(self.conn, stat.path)
                store.delete_note(self.conn, known.rowid, has_vectors=has_vectors)
                self._release_id(freed)
                report.removed += 1
        elif prepared.note is not None and prepared.rows is not None:
            note = prepared.note
            for warning in note.warnings:
                log.warn("note_warning", path=stat.path, warning=warning)
            row, chunks, links = prepared.rows
            before = store.id_of(self.conn, stat.path) if known is not None else None
            assigned = self._claim_id(note)
            if assigned != note.id:
                row = replace(row, id=assigned)
            if before is not None and before != assigned:
                store.set_note_id(self.conn, stat.path, assigned)  # free `before` first
            store.upsert_note(self.conn, row, chunks, note.tags, links, has_vectors=has_vectors)
            if before is not None and before != assigned:
                self._release_id(before)
            if known is None:
                report.added += 1
            else:
                report.updated += 1
            report.changed_paths.append(stat.path)

    def _claim_id(self, note: Note) -> str:
        """The id this note gets. Two files may ask for one frontmatter id (a duplicated
        note): the one whose path sorts first keeps it and the other gets an id derived from
        its path, the rule a full rebuild (which goes in path order) applies, so incremental
        and full agree whatever order the files changed in."""
        holder = store.id_holder(self.conn, note.id)
        if holder is None or holder == note.path:
            return note.id
        if not (self.root / holder).exists():
            # The holder's file is gone (a move whose old path we have not heard about yet):
            # the id moves with the note.
            stale = store.load_stat(self.conn, holder)
            if stale is not None:
                store.delete_note(
                    self.conn, stale.rowid, has_vectors=store.has_vector_table(self.conn)
                )
            return note.id
        if note.path < holder:
            fallback = self._fallback_id(holder)
            store.set_note_id(self.conn, holder, fallback)
            log.warn("duplicate_id", path=holder, id=note.id, other=note.path, used=fallback)
            return note.id
        fallback = self._fallback_id(note.path)
        log.warn("duplicate_id", path=note.path, id=note.id, other=holder, used=fallback)
        return fallback

    def _fallback_id(self, path: str) -> str:
        candidate, n = derived_id(path), 1
        while (h := store.id_holder(self.conn, candidate)) is not None and h != path:
            n += 1
            candidate = derived_id(f"{path}#{n}")
        return candidate

    def _release_id(self, freed: str | None) -> None:
        """An id no note holds any more goes to the first file (by path) that asks for it."""
        if freed is None or store.id_holder(self.conn, freed) is not None:
            return
        claimant = store.first_claimant(self.conn, freed)
        if claimant is not None:
            store.set_note_id(self.conn, claimant, freed)


@dataclass(frozen=True)
class Prepared:
    """One file, read and parsed, ready to store (or the reason it is not)."""

    stat: FileStat
    # "index" | "same" (bytes unchanged) | "gone" | "unreadable" (I/O) | "invalid" (not UTF-8)
    kind: str
    note: Note | None = None
    rows: tuple[store.NoteRow, list[store.ChunkRow], list[store.LinkRow]] | None = None
    reason: str = ""


def prepare(
    root: Path, stat: FileStat, known_hash: str | None, settings: Settings, summarize: bool
) -> Prepared:
    """Everything about one file that needs no database: pure, so it can run anywhere."""
    try:
        raw = (root / stat.path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return Prepared(stat, "gone")  # vanished between the stat and the read
    except OSError as exc:
        return Prepared(stat, "unreadable", reason=exc.__class__.__name__)
    if known_hash is not None and hashlib.blake2b(raw, digest_size=16).hexdigest() == known_hash:
        return Prepared(stat, "same")
    try:
        note = parse_note(stat.path, raw)
    except UnreadableNote as exc:
        return Prepared(stat, "invalid", reason=str(exc))
    # The frontmatter block is at the top: its `lang:` needs no second YAML parse.
    lang = frontmatter_language(raw[:8192].decode("utf-8", "ignore"))
    return Prepared(stat, "index", note, build_rows(note, stat, settings, summarize, lang))


_worker_context: tuple[Settings, bool] | None = None


def _init_worker(settings: Settings, summarize: bool) -> None:
    global _worker_context
    _worker_context = (settings, summarize)
    log.set_quiet(True)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent was killed (kill -9 mid-sync) must not linger forever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _prepare_in_worker(job: tuple[FileStat, str | None]) -> Prepared:
    assert _worker_context is not None
    settings, summarize = _worker_context
    return prepare(settings.vault_path, job[0], job[1], settings, summarize)


def _prefixed(f: FileStat, prefix: str) -> FileStat:
    return FileStat(prefix + f.path, f.mtime_ns, f.size)


def _stat_file(path: Path, max_bytes: int) -> tuple[int, int] | None:
    """(mtime_ns, size) of an indexable file; None when it is gone or not indexable.
    Other OSErrors (permissions) propagate: unreadable is not gone."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat_is_file(st.st_mode) or st.st_size > max_bytes:
        return None
    return st.st_mtime_ns, st.st_size


class _Batch:
    """Commit every BATCH_NOTES notes or BATCH_SECONDS, always between two notes."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.count = 0
        self.started = 0.0

    def __enter__(self) -> _Batch:
        self._begin()
        return self

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.count = 0
        self.started = time.monotonic()

    def tick(self) -> None:
        self.count += 1
        if self.count >= BATCH_NOTES or time.monotonic() - self.started > BATCH_SECONDS:
            self.conn.execute("COMMIT")
            self._begin()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
