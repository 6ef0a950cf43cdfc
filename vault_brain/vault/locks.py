"""One writer at a time per note, across every process that has the vault open.

A desktop client starts one stdio server per window, so two processes may update one
note with the same version. The compare (is the file still the version the caller read?)
and the rename must be one step for all of them: an OS file lock (flock; LockFileEx on
Windows, through `filelock`) held around both. The kernel drops it when its holder dies,
even on kill -9, so a crash never leaves a stale lock behind.

Lock files live in `<vault>/.vault-brain/locks/`: a hidden folder every process that
opens the vault finds, whatever its index path. They are striped (64 files, keyed by a
hash of the note's name as Unicode- and case-folded), so the folder never grows and two
spellings of one name on a case- or normalisation-insensitive disk share a lock.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from vault_brain import log
from vault_brain.config import INDEX_DIR
from vault_brain.errors import Forbidden, Unavailable
from vault_brain.vault.paths import name_key

LOCKS_DIR = "locks"
STRIPES = 64
TIMEOUT_SECONDS = 10.0
# Threads of one process take the in-process stripe first, so they never poll the file.
_THREAD_LOCKS = tuple(threading.Lock() for _ in range(STRIPES))
_warned: set[str] = set()


def state_dir(root: Path) -> Path:
    """`<vault>/.vault-brain`, refused when it leads outside the vault (a cloned vault may
    carry a symlink there): vault-brain writes nothing outside the vault."""
    root = Path(root)
    folder = root / INDEX_DIR
    root_real = os.path.realpath(root)
    real = os.path.realpath(folder)
    if os.path.commonpath([root_real, real]) != root_real or real == root_real:
        raise Forbidden(f"the vault's {INDEX_DIR} folder leads outside the vault")
    return folder


def prepare(root: Path) -> None:
    """Make the lock folder before a watcher starts: a folder that appears under a
    recursive watch while it is starting is registered twice by watchdog's inotify
    (a RuntimeWarning at every stop). A vault that cannot hold it is left as it is."""
    try:
        (state_dir(root) / LOCKS_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass


def lock_path(root: Path, rel: str) -> Path:
    """The lock file that guards the note at vault-relative `rel`."""
    digest = hashlib.blake2b(name_key(rel).encode("utf-8", "surrogatepass"), digest_size=8)
    stripe = int.from_bytes(digest.digest(), "big") % STRIPES
    return state_dir(root) / LOCKS_DIR / f"{stripe:02x}.lock"


@contextmanager
def note_lock(root: Path, rel: str, timeout: float = TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the note's lock (this process's threads and every other process) inside the
    block. Raises Unavailable (retryable) when another writer holds it for `timeout`."""
    path = lock_path(root, rel)
    thread_lock = _THREAD_LOCKS[int(path.stem, 16)]
    if not thread_lock.acquire(timeout=timeout):
        raise Unavailable("another write to this note is in progress; try again")
    try:
        lock = _file_lock(path, timeout)
        try:
            if lock is not None:
                lock.acquire()
        except filelock.Timeout as exc:
            raise Unavailable("another process is writing this note; try again") from exc
        except (OSError, NotImplementedError) as exc:  # a file system without flock
            _warn_once(str(path.parent), type(exc).__name__)
            lock = None
        try:
            yield
        finally:
            if lock is not None:
                lock.release()
    finally:
        thread_lock.release()


def _file_lock(path: Path, timeout: float) -> filelock.BaseFileLock | None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        # A vault we may write notes into but not a hidden folder: keep writing, with the
        # one-process guarantee only, and say so once.
        _warn_once(str(path.parent), type(exc).__name__)
        return None
    return filelock.FileLock(
        str(path),
        timeout=timeout,
        thread_local=False,
        poll_interval=0.002,
        # Deleting lock files races with a process that is about to take one.
        preserve_lock_file=True,
        # A "soft" lock (a file that exists) would outlive a killed process.
        fallback_to_soft=False,
    )


def _warn_once(where: str, error: str) -> None:
    if where not in _warned:
        _warned.add(where)
        log.warn("note_lock_unavailable", path=log.cut(where), error=error)
