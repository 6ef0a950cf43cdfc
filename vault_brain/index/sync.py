"""Files → index. A stat pass finds candidates, a content hash decides, and only changed
notes are re-parsed and re-chunked. Notes are stored in batched transactions, each note
whole, so the index never holds half a note; link targets are resolved as notes come and
go, so backlinks are one indexed lookup."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG as stat_is_file
from typing import TYPE_CHECKING

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.errors import NotFound, Unavailable
from vault_brain.index import text
from vault_brain.index.hashes import iso_utc
from vault_brain.index.links import link_keys
from vault_brain.index.port import Index, SyncWrites, Writes
from vault_brain.index.records import INSTANT, ChunkRow, StoredStat
from vault_brain.vault.scan import FileStat, is_ignored, scan_vault

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.embed.base import Embedder
    from vault_brain.index.prepared import Prepared
    from vault_brain.vault.note import Note

PARALLEL_MIN = 400  # files to parse before worker processes pay for their start-up
MAX_WORKERS = 4
BATCH_NOTES = 200  # notes per transaction: each note is whole, commits stay cheap
BATCH_SECONDS = 0.5  # ... and short, so another process's save never waits long
VECTORS_PER_CALL = 1024  # vectors per store call: what the vector queue stores at once
# A pass of many batches puts its vectors in the embedding cache this many bytes at a time
# (and at its end), in hash order, not with every transaction (_Vectors).
CACHE_BYTES = 64 << 20
# Set while a pass of many batches has stored notes whose links it resolves only at its
# end; a pass killed before then leaves it set, and the next sync_all resolves every link.
LINKS_PENDING = "links_pending"
# How long after its mtime a file may still be saved again without its mtime moving: file
# systems keep mtimes to a tick (FAT 2 s, HFS+ and some network shares 1 s, a coarse
# kernel clock a few ms). A file stored within this of its mtime is remembered with
# UNSURE_MTIME, so the next pass reads and hashes it instead of trusting its stat.
MTIME_TICK_NS = 2_000_000_000
UNSURE_MTIME = -1


@dataclass
class SyncReport:
    scanned: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    vectors: int = 0  # instant vectors stored with the notes (made by parse workers)
    ms: float = 0.0
    stopped: bool = False  # asked to stop (Ctrl-C): notes stored so far stay, the rest wait

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed

    def counts(self) -> dict[str, int]:
        """What a log line says about this sync."""
        return {"added": self.added, "updated": self.updated, "removed": self.removed}


@dataclass(frozen=True)
class SyncProgress:
    """Where a long sync is: the phase ("scan", "parse"), files done of total, chunks."""

    phase: str
    done: int
    total: int
    chunks: int = 0


Progress = Callable[[SyncProgress], None]


class Syncer:
    """Applies file changes to the index. Reading and parsing happen outside any write
    transaction; each transaction stores a batch of whole notes (never half of one) and
    re-resolves the links the batch touched before it commits; a pass of many batches
    (a first index) resolves them once, after its last batch."""

    def __init__(
        self,
        index: Index,
        settings: Settings,
        *,
        summarize: bool = False,
        instant: Embedder | None = None,
    ) -> None:
        self.index = index
        self.settings = settings
        self.root = settings.vault_path
        self.summarize = summarize
        # The instant tier's model when parse workers can build the same one (a local
        # model: `worker_settings`): a big pass then stores each note's vectors with it.
        self.instant = instant if getattr(instant, "worker_settings", None) else None

    # -- entry points ------------------------------------------------------------

    def sync_all(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        """Every file of the vault against the index. `stop`, once set, ends the pass after
        the batch being stored: what is stored stays (with its links), the next pass picks
        up the rest, since an unstored file still differs from the index."""
        started = time.perf_counter()
        v = self.settings.vault
        if progress is not None:
            progress(SyncProgress("scan", 0, 0))
        scan = scan_vault(self.root, v.ignore, v.max_file_bytes, follow_outside=v.follow_outside)
        for path, reason in scan.skipped:
            log.warn("file_skipped", path=path, reason=reason)
        for folder in scan.unreadable_dirs:
            log.warn("folder_unreadable", path=folder)
        if progress is not None:
            progress(SyncProgress("scan", len(scan.rows), len(scan.rows)))
        languages = self.settings.text.languages
        with self.index.read() as r:
            reanalyse = text.analyzer_changed(r, languages)  # another analyser: every note
        if full or reanalyse:
            # A rebuild: start from an empty index, exactly as a first index does.
            with self.index.transaction() as w:
                w.clear_notes()
                if reanalyse:
                    # Recorded with the clearing: every note stored from now on is analysed
                    # so, and a pass cut short (Ctrl-C, a crash) is continued, not redone.
                    text.mark_analyzed(w, languages)
        with self.index.read() as r:
            interrupted = bool(r.get_meta(LINKS_PENDING))
            if not (full or reanalyse or interrupted) and r.note_stats() == scan.rows:
                # The vault as stored (the common pass: a one-shot search's refresh, a
                # watcher's start): one list compared in C, no stat made per note.
                n = len(scan.rows)
                report = SyncReport(scanned=n, unchanged=n, skipped=len(scan.skipped))
                report.ms = round((time.perf_counter() - started) * 1000, 1)
                return report
            indexed = r.load_stats()
        if interrupted:
            # A pass of many batches was cut short before it resolved its links. Only the
            # indexer-lock holder runs big passes and sync_all, so none is under way now.
            with self.index.transaction() as w:
                w.resolve_every_link()
                w.set_meta(LINKS_PENDING, None)
        report = self._apply(
            {f.path: f for f in scan.files}, indexed, scan.unreadable_dirs, full, progress, stop
        )
        report.scanned = len(scan.rows)
        report.skipped += len(scan.skipped)
        report.ms = round((time.perf_counter() - started) * 1000, 1)
        return report

    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Re-check only these vault-relative paths (files or folders; present or gone).

        A path reached through a symlink (a folder link made or removed) gets the full
        stat pass instead: only the scanner, which sees every link of the vault at once,
        applies the link rules (into the vault: skipped as a second path; outside: only
        into a trusted folder) the way a rebuild does."""
        paths = [p for p in paths]
        if any(self._through_link(p.strip("/")) for p in paths):
            return self.sync_all()
        started = time.perf_counter()
        v = self.settings.vault
        on_disk: dict[str, FileStat] = {}
        indexed: dict[str, StoredStat] = {}
        unreadable: list[str] = []
        skipped = 0
        for raw in paths:
            rel = raw.strip("/")
            if not rel or is_ignored(rel, v.ignore):
                continue
            prefix = rel + "/"
            with self.index.read() as r:
                indexed.update(r.load_stats_under(rel))
            full = self.root / rel
            try:
                is_dir = full.is_dir()
            except PermissionError:
                unreadable.append(rel)
                continue
            if is_dir:
                try:
                    sub = scan_vault(
                        full, v.ignore, v.max_file_bytes, under=rel, follow_outside=v.follow_outside
                    )
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

    def _through_link(self, rel: str) -> bool:
        here = self.root
        for part in rel.split("/"):
            if not part:
                continue
            here = here / part
            if os.path.islink(here):
                return True
        return False

    # -- the work ------------------------------------------------------------------

    def _apply(
        self,
        on_disk: dict[str, FileStat],
        indexed: dict[str, StoredStat],
        unreadable_dirs: list[str],
        full: bool,
        progress: Progress | None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        report = SyncReport()
        gone = [p for p in indexed if p not in on_disk]
        if unreadable_dirs:
            gone = [
                p
                for p in gone
                if not any(p == d or p.startswith(d.rstrip("/") + "/") for d in unreadable_dirs)
            ]
        if full:
            candidates = list(on_disk.values())
        else:  # one lookup per file, no tuples: this runs for every file of every pass
            candidates = [
                f
                for p, f in on_disk.items()
                if (held := indexed.get(p)) is None
                or held.mtime_ns != f.mtime_ns
                or held.size != f.size
            ]
        report.unchanged = len(on_disk) - len(candidates)
        jobs = [
            (stat, None if full or stat.path not in indexed else indexed[stat.path].content_hash)
            for stat in candidates
        ]
        if gone:
            # Deletions first, in one transaction: a moved note frees its id before its new
            # path claims it.
            with self.index.transaction() as w:
                batch = _Touched()
                for path in gone:
                    self._delete(w, path, indexed[path].rowid, batch)
                    report.removed += 1
                w.resolve_links(batch.keys, batch.rowids)
        # A pass of many batches resolves links once, at its end: resolving per batch
        # re-read every note indexed so far each time (2 s of a cpp-docs first index).
        deferred = _Touched() if len(jobs) > BATCH_NOTES else None
        done = chunks = 0
        if progress is not None and jobs:
            progress(SyncProgress("parse", 0, len(jobs)))
        prepared_all = self._prepare_all(jobs)
        vectors = None
        if self.instant is not None:
            vectors = _Vectors(self.instant.name, CACHE_BYTES if deferred is not None else 0)
        put_off = False  # a first index: secondary indexes are built at its end, sorted
        try:
            for prepared in _batches(prepared_all):
                with self.index.transaction() as w:
                    batch = _Touched() if deferred is None else deferred
                    if deferred is not None and not done:
                        w.set_meta(LINKS_PENDING, "1")
                        put_off = not w.has_notes()
                        if put_off:
                            w.put_off_indexes()
                    for item in prepared:
                        chunks += self._store(
                            w, item, indexed.get(item.stat.path), report, batch, vectors
                        )
                    if vectors is not None:
                        report.vectors += vectors.store(w)
                    if deferred is None:
                        w.resolve_links(batch.keys, batch.rowids)
                done += len(prepared)
                if progress is not None:
                    progress(SyncProgress("parse", done, len(jobs), chunks))
                if stop is not None and stop.is_set() and done < len(jobs):
                    report.stopped = True
                    prepared_all.close()  # parse workers stop now
                    break
        except BaseException:
            if put_off:
                self._make_indexes_anyway()
            raise
        if deferred is not None:
            with self.index.transaction() as w:
                if put_off:
                    w.make_indexes()  # links_target first: resolving reads it
                if vectors is not None:
                    vectors.cache(w)
                w.resolve_links(deferred.keys, deferred.rowids)
                w.set_meta(LINKS_PENDING, None)
        return report

    def _make_indexes_anyway(self) -> None:
        """A first index failed midway: the indexes it put off, made now if they can be
        (else the next open of the index makes them: index/sqlite/db.py)."""
        try:
            with self.index.transaction() as w:
                w.make_indexes()
        except Exception as exc:  # noqa: BLE001 - the pass's own error is what the caller sees
            log.warn("indexes_not_made", error=str(exc)[:200])

    def _prepare_all(self, jobs: list[tuple[FileStat, str | None]]) -> Iterator[Prepared]:
        """Read, parse and chunk: in worker processes when there is a lot of it, in this
        process otherwise (or when workers cannot start). Results come back in order."""
        if not jobs:
            return
        workers = min(MAX_WORKERS, os.cpu_count() or 1)
        if len(jobs) >= PARALLEL_MIN and workers >= 2:
            from vault_brain.index.workers import ParsePool, WorkerError

            done = 0
            embed = getattr(self.instant, "worker_settings", None)
            try:
                with ParsePool((self.settings, self.summarize, embed), workers) as pool:
                    for item in pool.map(jobs):
                        done += 1
                        yield item
                return
            except (WorkerError, OSError) as exc:
                log.warn("parse_workers_failed", error=str(exc)[:200], fallback="in-process")
                jobs = jobs[done:]
        # A file whose bytes did not change is told by its hash without the parser's import
        # (index/prepared.py): a search's refresh after a touch or a recent edit.
        from vault_brain.index.prepared import Prepared, read_unless_same

        follow = self.settings.vault.follow_outside
        for stat, known in jobs:
            raw = read_unless_same(self.root, stat, known, follow)
            if isinstance(raw, Prepared):
                yield raw
                continue
            from vault_brain.index.prepare import prepare_bytes  # chunking loads only now

            yield prepare_bytes(stat, raw, self.settings, self.summarize)

    def _delete(self, w: SyncWrites, path: str, rowid: int, batch: _Touched) -> None:
        batch.keys |= w.keys_of(rowid)
        freed = w.id_of(path)
        w.delete_note(rowid)
        self._release_id(w, freed)

    def _store(
        self,
        w: SyncWrites,
        prepared: Prepared,
        known: StoredStat | None,
        report: SyncReport,
        batch: _Touched,
        vectors: _Vectors | None = None,
    ) -> int:
        """Store one prepared file (and the vectors a worker made for it, into `vectors`);
        returns how many chunks it wrote."""
        stat = prepared.stat
        if prepared.kind == "unreadable":
            # A transient read error must not drop what the index already holds.
            log.warn("file_unreadable", path=stat.path, error=prepared.reason)
            report.skipped += 1
        elif prepared.kind == "same" and known is not None:
            mtime = _remembered_mtime(stat.mtime_ns)
            w.touch_note(known.rowid, mtime, stat.size, iso_utc(stat.mtime_ns))
            report.unchanged += 1
        elif prepared.kind in ("invalid", "gone"):
            if prepared.kind == "invalid":
                log.warn("file_skipped", path=stat.path, reason=prepared.reason)
                report.skipped += 1
            if known is not None:
                self._delete(w, stat.path, known.rowid, batch)
                report.removed += 1
        elif prepared.note is not None and prepared.rows is not None:
            note = prepared.note
            for warning in note.warnings:
                log.warn("note_warning", path=stat.path, warning=warning)
            row, chunks, links = prepared.rows
            before = w.id_of(stat.path) if known is not None else None
            if known is not None:
                batch.keys |= w.keys_of(known.rowid)
            assigned = self._claim_id(w, note, batch)
            if assigned != note.id:
                row = row._replace(id=assigned)
            if (mtime := _remembered_mtime(stat.mtime_ns)) != row.mtime_ns:
                row = row._replace(mtime_ns=mtime)
            if before is not None and before != assigned:
                w.set_note_id(stat.path, assigned)  # free `before` first
            rowid = w.upsert_note(row, chunks, note.tags, links)
            if vectors is not None and prepared.vectors is not None:
                vectors.add(w.chunk_keys(rowid), chunks, prepared.vectors)
            if known is None:
                w.redirect_moved(row.id, row.content_hash)
            batch.keys |= link_keys(row.path_key, row.aliases)
            batch.rowids.add(rowid)
            if before is not None and before != assigned:
                self._release_id(w, before)
            if known is None:
                report.added += 1
            else:
                report.updated += 1
            return len(chunks)
        return 0

    def _claim_id(self, w: SyncWrites, note: Note, batch: _Touched) -> str:
        """The id this note gets. Two files may ask for one frontmatter id (a duplicated
        note): the one whose path sorts first keeps it and the other gets an id derived from
        its path, the rule a full rebuild (which goes in path order) applies, so incremental
        and full agree whatever order the files changed in."""
        holder = w.id_holder(note.id)
        if holder is None or holder == note.path:
            return note.id
        if not (self.root / holder).exists():
            # The holder's file is gone (a move whose old path we have not heard about yet):
            # the id moves with the note.
            stale = w.load_stat(holder)
            if stale is not None:
                batch.keys |= w.keys_of(stale.rowid)
                w.delete_note(stale.rowid)
            return note.id
        if note.path < holder:
            fallback = self._fallback_id(w, holder)
            w.set_note_id(holder, fallback)
            log.warn("duplicate_id", path=holder, id=note.id, other=note.path, used=fallback)
            return note.id
        fallback = self._fallback_id(w, note.path)
        log.warn("duplicate_id", path=note.path, id=note.id, other=holder, used=fallback)
        return fallback

    def _fallback_id(self, w: SyncWrites, path: str) -> str:
        from vault_brain.vault.note import derived_id  # note parsing: only when notes change

        candidate, n = derived_id(path), 1
        while (h := w.id_holder(candidate)) is not None and h != path:
            n += 1
            candidate = derived_id(f"{path}#{n}")
        return candidate

    def _release_id(self, w: SyncWrites, freed: str | None) -> None:
        """An id no note holds any more goes to the first file (by path) that asks for it."""
        if freed is None or w.id_holder(freed) is not None:
            return
        claimant = w.first_claimant(freed)
        if claimant is not None:
            w.set_note_id(claimant, freed)


@dataclass
class _Touched:
    """What one transaction changed that links may resolve to or from."""

    keys: set[str] = field(default_factory=set)
    rowids: set[int] = field(default_factory=set)


class _Vectors:
    """The instant vectors parse workers made for one transaction's notes, stored with
    them: the tier is switched to the model first when it holds another (as the vector
    queue does), and only chunks still pending with that text take a vector.

    With `cache_bytes`, their embedding-cache rows wait until that many bytes of them are
    held (or the pass ends: `cache`), then go in hash order (Writes.cache_vectors): the
    cache is only ever a shortcut, so rows that a killed pass never wrote cost a re-embed."""

    def __init__(self, model: str, cache_bytes: int = 0) -> None:
        self.model = model
        self.items: list[tuple[int, str, bytes]] = []
        self._ready = False
        self._cache_bytes = cache_bytes
        self._held: list[tuple[str, bytes]] = []
        self._held_bytes = 0

    def add(self, keys: list[int], chunks: list[ChunkRow], vectors: np.ndarray) -> None:
        if len(keys) == len(chunks) == len(vectors):
            self.items += [
                (key, c.text_hash, v.tobytes())
                for key, c, v in zip(keys, chunks, vectors, strict=True)
            ]

    def store(self, w: Writes) -> int:
        """Store what was added; returns how many chunks took a vector."""
        if not self.items:
            return 0
        if not self._ready:
            held = w.vectors_model(INSTANT)
            if held is None or held[0] != self.model:
                w.reset_vectors(self.model, len(self.items[0][2]) // 4, INSTANT)
            self._ready = True
        stored = 0
        later = self._cache_bytes > 0
        for at in range(0, len(self.items), VECTORS_PER_CALL):
            part = self.items[at : at + VECTORS_PER_CALL]
            stored += w.store_vectors(self.model, part, INSTANT, cache=not later)
        if later:
            self._held += [(h, v) for _, h, v in self.items]
            self._held_bytes += sum(len(v) for _, _, v in self.items)
            if self._held_bytes >= self._cache_bytes:
                self.cache(w)
        self.items = []
        return stored

    def cache(self, w: Writes) -> None:
        """The held vectors into the embedding cache."""
        if self._held:
            w.cache_vectors(self.model, self._held)
        self._held, self._held_bytes = [], 0


def _batches(items: Iterator[Prepared]) -> Iterator[list[Prepared]]:
    """Group prepared files into transactions of BATCH_NOTES, or what BATCH_SECONDS of
    parsing gave: the write lock is held for storing only, never while parsing."""
    batch: list[Prepared] = []
    started = time.monotonic()
    for item in items:
        batch.append(item)
        if len(batch) >= BATCH_NOTES or time.monotonic() - started > BATCH_SECONDS:
            yield batch
            batch = []
            started = time.monotonic()
    if batch:
        yield batch


def _remembered_mtime(mtime_ns: int) -> int:
    """The mtime the index keeps for a file read now. One whose tick may not be over (its
    mtime is recent, or in the future) could be saved again, same size, without its mtime
    moving, and a stat compare would miss that save for good (git's "racily clean" files):
    it is kept as UNSURE_MTIME, which no stat matches, so the next pass hashes it."""
    if mtime_ns > time.time_ns() - MTIME_TICK_NS:
        return UNSURE_MTIME
    return mtime_ns


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
