"""Live sync: filesystem events → debounced syncs of the paths they name.

People edit in Obsidian while models read, so the index follows each save within a
blink and costs nothing while idle (threads sleep on conditions, never spin). Events only
say *which* paths to look at; the sync re-reads the files, so lost, doubled or reordered
events cannot make the index wrong, and whenever events may have been lost (start,
observer error, kernel queue overflow) one full stat-pass reconcile sets things right.

The watcher knows nothing of roles or locks: the Indexer (indexer.py) starts one when its
process takes the vault's indexer lock, and gives it itself as the target.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.index.sync import SyncReport
from vault_brain.vault import locks
from vault_brain.vault.reading import link_refusal, trusted_roots
from vault_brain.vault.scan import is_ignored, is_markdown


class SyncTarget(Protocol):
    """What the watcher drives (the Indexer)."""

    def sync(self) -> SyncReport: ...

    def sync_paths(self, paths: Iterable[str]) -> SyncReport: ...


# Opened/closed-without-write events are left out: the indexer's own reads must not wake it.
WATCHED_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileAttribEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirAttribEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
HEALTH_CHECK_SECONDS = 5.0  # how often an idle watcher checks that its observer still runs
MAX_WAIT_SECONDS = 2.0  # a path that never goes quiet is still synced this often
BACKOFF_MAX_SECONDS = 60.0
RECENT_BATCHES = 200


@dataclass
class _Dirty:
    first: float
    last: float
    folder: bool


@dataclass(frozen=True)
class WatchStats:
    """Counters for status lines, tests and the latency benchmark."""

    running: bool
    batches: int
    paths_synced: int
    reconciles: int
    errors: int
    pending: int
    health_checks: int  # the worker's look at its observer, every health_check_seconds idle
    wakeups: int  # times the worker woke from its wait: an idle one wakes for health checks


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._watcher._on_event(event)


class _WatchdogLogHook(logging.Handler):
    """watchdog reports queue overflow and snapshot failures only as log warnings."""

    def __init__(self, watcher: Watcher) -> None:
        super().__init__(level=logging.WARNING)
        self._watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the observer thread
            message = str(record.msg)
        log.warn("watch_observer_warning", source=record.name, message=log.cut(message, 200))
        self._watcher.request_reconcile("observer_warning")


class Watcher:
    """Keeps one vault's index equal to its files while running (threads, not a process):
    a watchdog observer feeds dirty paths to a worker thread that calls
    `target.sync_paths` once per quiet batch, and `target.sync` for a full reconcile."""

    def __init__(
        self,
        target: SyncTarget,
        settings: Settings,
        *,
        index_folder: Path | None = None,
        health_check_seconds: float = HEALTH_CHECK_SECONDS,
    ) -> None:
        """`index_folder`: where the index writes its own files (Index.folder), left alone
        when it lies inside the vault."""
        self.target = target
        self.settings = settings
        self._root = str(settings.vault_path)
        self._prefix = self._root.rstrip(os.sep) + os.sep
        self._ignore = tuple(settings.vault.ignore)
        self._index_dir = self._index_dir_rel(settings.vault_path, index_folder)
        self._debounce = max(0.0, settings.watch.debounce_ms / 1000.0)
        self._max_wait = max(MAX_WAIT_SECONDS, 4 * self._debounce)
        # Paths due this soon ride along: one folder move's sub-events land in one batch.
        self._slack = self._debounce / 2
        self._health_every = health_check_seconds

        self._cond = threading.Condition()
        self._pending: dict[str, _Dirty] = {}
        self._reconcile_at: float | None = None
        self._reconcile_reason = ""
        self._backoff = 0.0
        self._busy = False
        self._stopping = False
        self._running = False
        self._next_health = 0.0
        self._last_folders: set[str] = set()
        self._links: dict[str, str] = {}  # real target of a trusted folder link -> its vault path
        self._link_watches: list[object] = []

        self._stop_event = threading.Event()
        self._state_lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self._handler = _Handler(self)
        self._log_hook = _WatchdogLogHook(self)
        self._threads: list[threading.Thread] = []

        self._batches = 0
        self._paths_synced = 0
        self._reconciles = 0
        self._errors = 0
        self._health_checks = 0
        self._wakeups = 0
        self.recent_batches: deque[tuple[str, ...]] = deque(maxlen=RECENT_BATCHES)

    # ----------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Start the observer and the sync worker; the first job is a full reconcile."""
        with self._state_lock:
            if self._running:
                return
            self._running = True
            self._stop_event.clear()
            logging.getLogger("watchdog").addHandler(self._log_hook)
            try:
                self._start_observer()
            except OSError as exc:
                log.warn("watch_observer_failed", error=log.cut(str(exc), 200))
                self._errors += 1
            self.request_reconcile("start")
            self._spawn(self._run_worker, "vault-brain-sync")

    def stop(self, timeout: float | None = None) -> None:
        """Stop watching after syncing every path still pending."""
        with self._state_lock:
            if not self._running:
                return
            self._stop_event.set()
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            if observer.is_alive():
                observer.join(timeout=10)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []
        logging.getLogger("watchdog").removeHandler(self._log_hook)
        with self._cond:
            self._stopping = False
            self._pending.clear()
            self._reconcile_at = None
            self._running = False
            self._cond.notify_all()

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def request_reconcile(self, reason: str, delay: float = 0.0) -> None:
        """Schedule one full stat-pass sync (events may have been lost)."""
        with self._cond:
            if not self._running or self._stopping:
                return
            due = time.monotonic() + delay
            if self._reconcile_at is None or due < self._reconcile_at:
                self._reconcile_at = due
                self._reconcile_reason = reason
            self._cond.notify_all()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is pending or running; False on timeout.

        Events still in flight inside the OS or the observer are not seen here: callers
        that just touched files wait a little (a poll interval when polling) first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy or self._reconcile_at is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stats(self) -> WatchStats:
        with self._cond:
            return WatchStats(
                running=self._running,
                batches=self._batches,
                paths_synced=self._paths_synced,
                reconciles=self._reconciles,
                errors=self._errors,
                pending=len(self._pending),
                health_checks=self._health_checks,
                wakeups=self._wakeups,
            )

    def _spawn(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _start_observer(self) -> None:
        if self.settings.watch.poll:
            observer: BaseObserver = PollingObserver(
                timeout=self.settings.watch.poll_interval_seconds
            )
        else:
            observer = Observer()
        locks.prepare(self._root)
        observer.schedule(self._handler, self._root, recursive=True, event_filter=WATCHED_EVENTS)
        observer.start()
        self._observer = observer

    def _observer_healthy(self) -> bool:
        observer = self._observer
        if observer is None or not observer.is_alive():
            return False
        return all(emitter.is_alive() for emitter in observer.emitters)

    def _check_observer(self) -> None:
        with self._state_lock:
            if not self._running or self._observer_healthy():
                return
            log.warn("watch_observer_restart")
            old, self._observer = self._observer, None
            if old is not None:
                old.stop()
            try:
                self._start_observer()
            except OSError as exc:
                log.warn("watch_observer_failed", error=log.cut(str(exc), 200))
                with self._cond:
                    self._errors += 1
                return
        self.request_reconcile("observer_restart")

    # -------------------------------------------------------------------- events

    @staticmethod
    def _index_dir_rel(vault: Path, index_folder: Path | None) -> str | None:
        if index_folder is None:
            return None
        try:
            rel = index_folder.relative_to(vault)
        except ValueError:
            return None
        return rel.as_posix() if rel.parts else None

    def _relative(self, path: str | bytes) -> str | None:
        text = os.fsdecode(path)
        if text == self._root:
            return ""
        if not text.startswith(self._prefix):
            return self._through_links(text)
        rel = text[len(self._prefix) :]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel

    def _through_links(self, text: str) -> str | None:
        """An event inside a trusted folder that a vault link leads to, as the vault path
        the scanner gives it (the link's path + the rest)."""
        for target, link_rel in self._links.items():
            if text == target or text.startswith(target + os.sep):
                rest = text[len(target) :].lstrip(os.sep).replace(os.sep, "/")
                return f"{link_rel}/{rest}" if rest else link_rel
        return None

    def _linked_folders(self) -> dict[str, str]:
        """{real target: vault path} of the vault's folder links into trusted folders
        outside it: watchdog does not follow links, so these get watches of their own."""
        trusted = trusted_roots(self.settings.vault_path, self.settings.vault.follow_outside)
        if not trusted:
            return {}
        vault_real = os.path.realpath(self._root)
        found: dict[str, str] = {}
        for folder, dirs, _files in os.walk(self._root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in list(dirs):
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    continue
                dirs.remove(name)
                real = os.path.realpath(path)
                inside = real == vault_real or real.startswith(vault_real + os.sep)
                if not inside and link_refusal(real, vault_real, trusted, is_dir=True) is None:
                    rel = self._relative(path)
                    if rel and not is_ignored(rel + "/", self._ignore):
                        found.setdefault(real, rel)
        return found

    def _watch_links(self) -> None:
        """Watches on the trusted folders that vault links lead to, as the links are now."""
        try:
            links = self._linked_folders()
        except OSError as exc:
            log.warn("watch_links_failed", error=log.cut(str(exc), 200))
            return
        with self._state_lock:
            observer = self._observer
            if observer is None or links.keys() == self._links.keys():
                self._links = links
                return
            for watch in self._link_watches:
                with contextlib.suppress(Exception):
                    observer.unschedule(watch)
            self._links = links
            self._link_watches = []
            for target in links:
                try:
                    watch = observer.schedule(
                        self._handler, target, recursive=True, event_filter=WATCHED_EVENTS
                    )
                except OSError as exc:
                    log.warn("watch_link_failed", error=log.cut(str(exc), 200))
                    continue
                self._link_watches.append(watch)

    def _wanted(self, rel: str, folder: bool) -> bool:
        if not folder and not is_markdown(rel):
            return False
        if self._index_dir and (rel == self._index_dir or rel.startswith(self._index_dir + "/")):
            return False
        return not is_ignored(rel + "/" if folder else rel, self._ignore)

    def _on_event(self, event: FileSystemEvent) -> None:
        named = [p for p in (event.src_path, getattr(event, "dest_path", "")) if p]
        if all(_hidden(self._relative(p)) for p in named):
            return  # a save's temp file, .obsidian, .git: nothing the index holds
        folder = event.is_directory
        if not folder and not is_markdown(os.fsdecode(event.src_path)):
            # Not a note: a folder link made, or something removed that may have been one
            # (a link's deletion no longer says what it was); syncing it as a folder is a
            # cheap look that finds nothing otherwise.
            src = os.fsdecode(event.src_path)
            dest = os.fsdecode(getattr(event, "dest_path", "") or "")
            folder = (
                os.path.islink(src)
                or (bool(dest) and os.path.islink(dest))
                or isinstance(event, FileDeletedEvent)
            )
        raw = [event.src_path]
        if isinstance(event, (FileMovedEvent, DirMovedEvent)) and event.dest_path:
            raw.append(event.dest_path)
        marks = []
        for path in raw:
            if not path:
                continue
            rel = self._relative(path)
            if rel is None:
                continue
            if rel == "":
                if isinstance(event, DirDeletedEvent):  # the vault itself vanished or moved
                    self.request_reconcile("vault_root_event", delay=1.0)
                continue
            if self._wanted(rel, folder):
                marks.append(rel)
        if marks:
            self._mark(marks, folder)

    def _mark(self, paths: Iterable[str], folder: bool, delay: float = 0.0) -> None:
        now = time.monotonic() + delay
        with self._cond:
            was_empty = not self._pending
            for rel in paths:
                dirty = self._pending.get(rel)
                if dirty is None:
                    self._pending[rel] = _Dirty(first=now, last=now, folder=folder)
                else:
                    dirty.last = max(dirty.last, now)
                    dirty.folder = dirty.folder or folder
            if was_empty:
                self._cond.notify_all()

    # -------------------------------------------------------------------- worker

    def _run_worker(self) -> None:
        while True:
            with self._cond:
                job = self._next_job_locked()
                if job is None:
                    self._cond.notify_all()
                    return
                self._busy = True
            kind, payload = job
            try:
                if kind == "reconcile":
                    self._reconcile(payload[0])
                elif kind == "paths":
                    self._sync_batch(payload)
                else:
                    self._check_observer()
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _next_job_locked(self) -> tuple[str, tuple[str, ...]] | None:
        while True:
            now = time.monotonic()
            if self._stopping:
                if self._pending:
                    return "paths", self._take_locked(list(self._pending))
                return None
            if self._reconcile_at is not None and now >= self._reconcile_at:
                reason = self._reconcile_reason
                self._reconcile_at = None
                self._pending.clear()  # the full pass below looks at every file anyway
                return "reconcile", (reason,)
            wake = now + self._health_every
            ready: list[str] = []
            earliest = wake
            for rel, dirty in self._pending.items():
                due = min(dirty.last + self._debounce, dirty.first + self._max_wait)
                if due <= now + self._slack:
                    ready.append(rel)
                    earliest = min(earliest, due)
                else:
                    wake = min(wake, due)
            if ready and earliest <= now:
                return "paths", self._take_locked(ready)
            wake = min(wake, earliest)
            if now >= self._next_health:
                self._next_health = now + self._health_every
                self._health_checks += 1
                return "health", ()
            wake = min(wake, self._next_health)
            if self._reconcile_at is not None:
                wake = min(wake, self._reconcile_at)
            self._cond.wait(max(0.0, wake - now))
            self._wakeups += 1

    def _take_locked(self, paths: list[str]) -> tuple[str, ...]:
        """Pop these paths; a folder in the batch stands for everything under it."""
        taken = {rel: self._pending.pop(rel) for rel in paths}
        folders = sorted(rel for rel, dirty in taken.items() if dirty.folder)
        kept: list[str] = []
        for rel in folders:  # sorted: a parent comes before its children
            if not any(rel.startswith(parent + "/") for parent in kept):
                kept.append(rel)
        covered = tuple(parent + "/" for parent in kept)
        files = [rel for rel, d in taken.items() if not d.folder and not rel.startswith(covered)]
        self._last_folders = set(kept)
        return tuple(sorted(kept + files))

    def _sync_batch(self, paths: tuple[str, ...]) -> None:
        started = time.perf_counter()
        try:
            report = self.target.sync_paths(list(paths))
        except Exception as exc:
            self._failed("sync_paths", exc)
            return
        with self._cond:
            self._batches += 1
            self._paths_synced += len(paths)
            self._backoff = 0.0
            self.recent_batches.append(paths)
        ms = round((time.perf_counter() - started) * 1000, 1)
        log.event("watch_batch", paths=len(paths), **report.counts(), ms=ms)
        if any(self._may_be_link(p) for p in paths):
            self._watch_links()
        if self.settings.watch.poll and report.added + report.updated + report.removed:
            self._verify_after_poll(paths)

    def _may_be_link(self, rel: str) -> bool:
        """A path that is a link now, or a non-note that is gone (perhaps a link)."""
        path = os.path.join(self._root, rel)
        return os.path.islink(path) or (not is_markdown(rel) and not os.path.lexists(path))

    def _verify_after_poll(self, paths: tuple[str, ...]) -> None:
        """Polling only: look again once the poller has had a turn.

        A folder scan or reconcile can see a file that comes and goes between two polls;
        the poller never reports it, so its row would stay. One more look at the folders
        after the next poll removes it; the look repeats only while it finds changes.
        """
        delay = 1.5 * self.settings.watch.poll_interval_seconds
        if not paths:
            self.request_reconcile("poll_verify", delay=delay)
            return
        folders = [p for p in paths if p in self._last_folders]
        if folders:
            self._mark(folders, True, delay)

    def _reconcile(self, reason: str) -> None:
        started = time.perf_counter()
        try:
            report = self.target.sync()
        except Exception as exc:
            self._failed("sync", exc)
            return
        with self._cond:
            self._reconciles += 1
            self._backoff = 0.0
        ms = round((time.perf_counter() - started) * 1000, 1)
        log.event(
            "watch_reconcile", reason=reason, scanned=report.scanned, **report.counts(), ms=ms
        )
        self._watch_links()  # links may have come or gone: the reconcile saw them all
        if self.settings.watch.poll and report.added + report.updated + report.removed:
            self._verify_after_poll(())

    def _failed(self, what: str, exc: Exception) -> None:
        """A failed sync loses no change: a full reconcile follows, with back-off."""
        with self._cond:
            self._errors += 1
            self._backoff = min(BACKOFF_MAX_SECONDS, max(0.5, self._backoff * 2))
            delay = self._backoff
        log.warn(
            "watch_sync_failed",
            call=what,
            error=type(exc).__name__,
            message=log.cut(str(exc), 200),
            retry_s=delay,
        )
        if not self._stop_event.is_set():
            self.request_reconcile(f"{what}_failed", delay=delay)


def _hidden(rel: str | None) -> bool:
    """A vault path whose own name starts with '.': the scanner never indexes it (nor
    anything below it)."""
    if not rel:
        return False
    return rel.rsplit("/", 1)[-1].startswith(".")
