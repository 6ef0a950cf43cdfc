"""One indexer per vault, for the SQLite backend: an OS file lock beside the index file
(index/port.py's `RoleLock`).

Several processes may open one vault (a stdio server per client window plus a watcher).
The first to take `<index dir>/indexer.lock` writes the index; the others only read. The
lock is an flock (LockFileEx on Windows) held through an open descriptor, so the kernel
drops it the moment the holder dies, even on kill -9: a waiting process takes over on its
next try, with no stale lock file to clean up.

Who holds it, and for what, sits beside it in `indexer.lock.json` ({"pid", "role"}): a
watcher (`watch`, `serve`) keeps the index in step for as long as it runs, an `index` run
only until it ends, so `status` and `index` tell them apart. The lock is the truth; the
record is read only while the lock is held, so one left by a killed holder misleads no one.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from vault_brain import log
from vault_brain.errors import Unavailable
from vault_brain.index.records import Holder

LOCK_NAME = "indexer.lock"  # beside the index file it guards
HOLDER_SUFFIX = ".json"  # indexer.lock.json: who holds the lock


class IndexerLock:
    """A non-blocking, process-wide hold on the indexer role.

    Not thread-local: the thread that takes the lock need not be the one that gives it up
    (a reader thread may promote itself; the server's shutdown releases).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._guard = threading.Lock()
        self._lock = _FileLock(str(self.path))

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def try_acquire(self, role: str | None = None) -> bool:
        """Take the lock if it is free; True when this process now holds it. `role` (WATCH,
        INDEX, REFRESH) is recorded for other processes to read."""
        with self._guard:
            if self._lock.is_locked:
                return True
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self._lock.acquire():
                    return False
            except OSError as exc:
                raise Unavailable(f"cannot open the indexer lock {self.path}: {exc}") from exc
            _write_holder(_holder_path(self.path), role)
            log.event("indexer_lock_acquired", path=str(self.path), pid=os.getpid(), role=role)
            return True

    def release(self) -> None:
        with self._guard:
            if not self._lock.is_locked:
                return
            # The record goes first: once the lock is free, the next holder writes its own.
            _holder_path(self.path).unlink(missing_ok=True)
            self._lock.release()
            log.event("indexer_lock_released", path=str(self.path), pid=os.getpid())

    def taken(self) -> bool:
        """True when some process (maybe this one) holds the lock.

        Readers use it to decide whether to sync before a search themselves. The probe takes
        and drops the lock at once; a would-be indexer that loses that instant race simply
        retries on its next attempt.
        """
        if self.held:
            return True
        if not self.path.exists():
            return False
        probe = _FileLock(str(self.path))
        try:
            # Shared: two processes probing at once (a `status`, a starting resident) must
            # not take each other for the indexer; only an exclusive holder refuses it.
            if not probe.acquire(shared=True):
                return True
        except OSError:
            return False
        probe.release()
        return False

    def holder(self) -> Holder | None:
        """Who holds the lock (maybe this process), or None when nobody does."""
        if not self.taken():
            return None
        try:
            record = json.loads(_holder_path(self.path).read_text("utf-8"))
            pid, role = record.get("pid"), record.get("role")
            return Holder(
                pid if isinstance(pid, int) else None, role if isinstance(role, str) else None
            )
        except (OSError, ValueError, AttributeError):
            return Holder(None, None)

    def __enter__(self) -> IndexerLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + HOLDER_SUFFIX)


def _write_holder(path: Path, role: str | None) -> None:
    """Write the record whole (a temp file renamed over it), so a reader never sees half."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(json.dumps({"pid": os.getpid(), "role": role}), encoding="utf-8")
        os.replace(temp, path)
    except OSError as exc:  # the lock still works; others only learn less about its holder
        log.warn("indexer_holder_not_recorded", error=str(exc)[:200])
        temp.unlink(missing_ok=True)


class _FileLock:
    """An exclusive OS lock on a file kept in place (deleting it would race a waiter),
    taken without waiting and held through an open descriptor, so the kernel drops it when
    its holder dies, even on kill -9. POSIX: flock from the standard library (the filelock
    package costs a one-shot CLI search ~15 ms of imports); elsewhere filelock (LockFileEx
    on Windows). Two descriptors of one process exclude each other, as two processes do."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._other: Any = None  # filelock's lock, where there is no flock

    @property
    def is_locked(self) -> bool:
        return self._fd is not None or (self._other is not None and self._other.is_locked)

    def acquire(self, *, shared: bool = False) -> bool:
        """True when taken now, False when someone holds it; OSError when the file cannot be
        opened or locked at all. `shared` (a probe; POSIX only) is refused only by an
        exclusive holder."""
        if os.name != "posix":
            return self._acquire_elsewhere()
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def _acquire_elsewhere(self) -> bool:
        import filelock

        if self._other is None:
            self._other = filelock.FileLock(
                self.path, thread_local=False, blocking=False, preserve_lock_file=True
            )
        try:
            self._other.acquire(blocking=False)
        except filelock.Timeout:
            return False
        return True

    def release(self) -> None:
        if self._other is not None:
            self._other.release(force=True)
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # the only descriptor of this open file: the flock goes with it
