"""The warm resident: a background process a CLI `search` leaves for its vault, so the next
searches skip the interpreter's start, the index's imports and the query model's load.

After a search that nothing running answered (it searched in-process, as it always did),
the CLI starts `vault-brain resident` fully detached: its own session, stdin and stdout on
/dev/null, stderr to resident.log beside the index, no other descriptor inherited, so a
script that captures the search's output is not held by it. The resident loads the index
and the query model at once, then answers on the warm socket (warm.py) as a watcher does.
Before each answer it does what a one-shot search does: a stat pass that catches up changed
files under the indexer lock for that pass only (none while a watcher or an `index` run
holds it). It never holds the indexer role between requests and never indexes in the
background (no e5 backlog).

It exits after `search.keep_warm` seconds without a request, when the vault folder or the
index file goes, when a `watch` or `serve` asks it to leave (they take the socket), and on
SIGTERM or SIGINT. At most one runs per vault: the socket's bind decides.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from vault_brain import log, warm

if TYPE_CHECKING:
    from vault_brain.config import Settings

LOG_NAME = "resident.log"
LOG_MAX_BYTES = 1024 * 1024  # past this the log starts over when a resident starts
CHECK_SECONDS = 0.5  # how often it looks at its signals, idle time, vault and index
DRAIN_SECONDS = 5.0  # at exit, how long an answer under way may take to finish


def spawn(settings: Settings, config_file: str | None) -> bool:
    """Start a resident for these settings, detached, unless keep_warm is 0, the platform
    has no unix sockets, or something answers on the socket already (a resident for these
    settings, or a watcher with other ones; a resident for other settings is replaced).
    True when one was started."""
    if settings.search.keep_warm <= 0 or os.name != "posix":
        return False
    if not warm.room_for_resident(settings):
        return False
    args = [sys.executable, "-m", "vault_brain", "resident", "--vault", str(settings.vault_path)]
    if config_file:
        args += ["--config", os.path.abspath(config_file)]
    log_to = str(_log_file(settings) or os.devnull)
    try:
        _start_detached(args, log_to)
    except OSError as exc:  # the search was answered; only the next one is slower
        log.warn("resident_not_started", error=log.cut(str(exc), 200))
        return False
    return True


def _start_detached(args: list[str], log_to: str) -> None:
    """`args` in a new session (no terminal's signals, not the caller's process group),
    stdin and stdout on /dev/null, stderr appended to `log_to`. posix_spawn (a vfork) takes
    4-8 ms where subprocess.Popen took 16-28 with its import: paid by every first search.
    Our descriptors are not inherited either way (Python opens them close-on-exec)."""
    try:
        os.posix_spawn(
            args[0],
            args,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, log_to, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
            ],
            setsid=True,
        )
        return
    except (AttributeError, NotImplementedError):  # no posix_spawn, or no setsid in it
        pass
    import subprocess

    fd = os.open(log_to, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as err:
        subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )


def _log_file(settings: Settings) -> Path | None:
    index = settings.index_path
    if index is None or not index.parent.is_dir():
        return None
    target = index.parent / LOG_NAME
    try:
        if target.stat().st_size > LOG_MAX_BYTES:
            target.unlink()
    except OSError:
        pass
    return target


def run(settings: Settings) -> str:
    """Be the vault's resident until a reason to leave; returns the reason."""
    from vault_brain.service import Brain

    received: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: received.append(signum))
    mode = settings.search.mode
    brain = Brain(settings, one_shot=False)
    host = warm.Host(
        kind="resident",
        ready=False,
        keep_warm=settings.search.keep_warm,
        before_search=lambda asked: _refresh(brain, asked or mode),
    )
    try:
        if brain.watched():  # a watcher or server answers (or will, once it has bound)
            return _left("watched")
        stop_listening = warm.listen(brain, host)
        if host.path is None:
            return _left("socket_taken")
        try:
            log.event(
                "resident_started", pid=os.getpid(), keep_warm=host.keep_warm, path=str(host.path)
            )
            _warm_up(brain, mode)
            host.ready = True
            index_inode = _inode(settings.index_path) if settings.index_path else None
            reason = None
            while reason is None:
                time.sleep(CHECK_SECONDS)
                reason = _reason_to_leave(settings, host, received, index_inode)
        finally:
            stop_listening()
            _drain(host)
        return _left(reason)
    finally:
        brain.close()


def _refresh(brain: object, mode: str) -> None:
    """What a one-shot search does before it searches (cli.py `search`)."""
    brain.refresh_if_unwatched(vectors=mode != "fts")  # type: ignore[attr-defined]


def _warm_up(brain: object, mode: str) -> None:
    """Load what a search needs now (the query model, the vectors, the index's pages), so
    the next CLI search finds them loaded."""
    try:
        brain.search("warm", mode=mode, light_query=True)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - the first real search says what is wrong
        log.warn("resident_warm_up_failed", error=type(exc).__name__)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _reason_to_leave(
    settings: Settings, host: warm.Host, received: list[int], index_inode: int | None
) -> str | None:
    if received:
        return signal.Signals(received[0]).name
    if host.leave.is_set():
        return "asked"  # a watch or serve took the socket
    if host.path is None or not warm.bound_here(host.path, host.inode):
        return "socket_gone"
    if not settings.vault_path.is_dir():
        return "vault_gone"
    index = settings.index_path
    if index is not None and _inode(index) != index_inode:
        return "index_gone"  # removed, or replaced by a new index: this one is not read
    if host.keep_warm is not None and host.idle_seconds() >= host.keep_warm:
        return "idle"
    return None


def _drain(host: warm.Host) -> None:
    deadline = time.monotonic() + DRAIN_SECONDS
    while host.busy_now() and time.monotonic() < deadline:
        time.sleep(0.05)


def _left(reason: str) -> str:
    log.event("resident_exit", pid=os.getpid(), reason=reason)
    return reason
