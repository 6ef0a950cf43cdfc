"""Work done by a forked process while this one does the rest of a search.

A one-shot hybrid search in a fresh process pays the vector arm's whole chain (numpy's
import, e5's light encoder: its weights and tokenizer, the query's pass, then the KNN over
every vector) on top of the work a full-text search does (the stat pass over the vault, the
arm). A thread could not overlap the two: most of it is imports and Python, which hold the
GIL, and the stat pass then waited on it (docs/benchmarks.md, "The first search, round 7").
A forked child runs on another core with no lock shared: it does the work and hands its
answer's bytes back through a pipe, while this process checks the vault and ranks full text
(search/semantic.py: the vector arm's whole answer, so this process never imports numpy).

Only where fork is safe without exec (Linux: macOS frameworks are not fork-safe) and a
second core may run it. Whatever goes wrong in the child (a model that will not load, a
signal), `result` raises EarlyFailed and the caller does the work in-process, as it would
have. The child never uses this process's connections, files or threads: it opens what it
needs, writes its answer and leaves with os._exit (no atexit handler, finaliser or
buffered output of this process runs twice).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable

_LENGTH = struct.Struct("<Q")  # the answer's length, before it: a cut answer is no answer


class EarlyFailed(Exception):
    """The child gave no answer: do the work in this process instead."""


def can_fork() -> bool:
    """Fork without exec is safe here, and this process may use a second core."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 2


class Early:
    """`work(told)`'s bytes, made in a forked child. A future of a kind: `result()` waits
    for them; `discard()` when they are not wanted (or no longer). `told()`, in the child,
    waits for what this process says to it (`tell`): the child may start what needs
    nothing from this process (imports, a model's load) before it is told the rest."""

    def __init__(self, work: Callable[[Callable[[], bytes]], bytes]) -> None:
        read, write = os.pipe()
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            os.close(tell)
            _child(work, write, told)
        os.close(write)
        os.close(told)
        self.pid = pid
        self._pid: int | None = pid  # until reaped
        self._fd: int | None = read
        self._tell: int | None = tell

    def tell(self, message: bytes) -> None:
        """Say `message` to the child (once); a child gone already is not an error here
        (`result` says it gave nothing)."""
        if self._tell is None:
            return
        fd, self._tell = self._tell, None
        try:
            _write_all(fd, _LENGTH.pack(len(message)) + message)
        except OSError:
            pass
        finally:
            os.close(fd)

    def result(self) -> bytes:
        """The child's answer; EarlyFailed when it gave none (whole). Waits for the answer,
        which the child gives (or dies) on its own, not for the child's end: its exit
        (the kernel tearing its memory down) takes 7-16 ms more, which a thread waits out
        (_reap)."""
        if self._fd is None:
            raise EarlyFailed("already read")
        try:
            return _read_message(self._fd, "the child ended without a whole answer")
        except OSError as exc:
            raise EarlyFailed(str(exc)) from None
        finally:
            self._close(kill=False)

    def discard(self) -> None:
        self._close(kill=True)

    def _close(self, *, kill: bool) -> None:
        if self._tell is not None:
            os.close(self._tell)
            self._tell = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._pid is not None:
            pid, self._pid = self._pid, None
            if kill:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
                _wait(pid)
            else:
                _reap(pid)


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _reap(pid: int) -> None:
    """Reap the child now if it has ended, else in a thread that waits for its end."""
    try:
        ended, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return
    if not ended:
        threading.Thread(target=_wait, args=(pid,), name="early-reap", daemon=True).start()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_message(fd: int, missing: str = "nothing was said") -> bytes:
    """A length-prefixed message, whole, or EarlyFailed(missing) (the writer closed or
    died first)."""
    data, whole = b"", None  # whole: the message's length with its own, once read
    while whole is None or len(data) < whole:
        block = os.read(fd, 1 << 16)
        if not block:
            raise EarlyFailed(missing)
        data += block
        if whole is None and len(data) >= _LENGTH.size:
            whole = _LENGTH.size + _LENGTH.unpack_from(data)[0]
    return data[_LENGTH.size :]


def _child(work: Callable[[Callable[[], bytes]], bytes], fd: int, told: int) -> None:
    """Work, write, and leave at once, whatever happens here."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):  # the parent speaks for the search: its errors, its output
            os.dup2(devnull, stream)
        answer = work(lambda: _read_message(told))
        _write_all(fd, _LENGTH.pack(len(answer)) + answer)
    except BaseException:  # noqa: BLE001 - the parent learns of it by the missing answer
        pass
    finally:
        os._exit(0)
