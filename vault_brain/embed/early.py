"""A query's vector made by a forked process while this one does the rest of a search.

A one-shot hybrid search in a fresh process pays the in-process model's start (e5's light
encoder: the weights, the tokenizer, a first pass over 85 MB of codes, ~60 CPU-ms; its graph
~110) on top of the work a full-text search does (the stat pass over the vault, the arm). A
thread could not overlap the two: the start is mostly imports and Python, which hold the
GIL, and the stat pass then waited on it (docs/benchmarks.md, "The first search, round 7").
A forked child runs on another core with no lock shared: it loads the model, embeds the
query and hands the vector's bytes back through a pipe, while this process checks the vault
and ranks full text. The same code on a batch of one gives the same bits as embedding here.

Only where fork is safe without exec (Linux: macOS frameworks are not fork-safe) and a
second core may run it. Whatever goes wrong in the child (a model that will not load, a
signal), `result` raises EarlyFailed and the caller embeds in-process, as it would have.
"""

from __future__ import annotations

import os
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.embed.base import Embedder

_SHAPE = struct.Struct("<II")  # rows, dims of the float32 matrix that follows


class EarlyFailed(Exception):
    """The child gave no vector: embed in this process instead."""


def can_fork() -> bool:
    """Fork without exec is safe here, and this process may use a second core."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 2


class EarlyQuery:
    """One query's vector by `embedder`, begun in a forked child. A future of a kind:
    `result()` waits for it; `discard()` when it is not wanted (or no longer)."""

    def __init__(self, embedder: Embedder, query: str, *, light: bool = False) -> None:
        """`light`: by the model's light encoder (embed/base.py embed_queries)."""
        self.name = embedder.name
        self.query = query
        # Imported here, before the fork: this process needs numpy for the search anyway,
        # and the child then has it too instead of importing it again (~40 CPU-ms).
        import numpy  # noqa: F401

        from vault_brain.embed import base  # noqa: F401

        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(embedder, query, write, light)
        os.close(write)
        self.pid = pid
        self._pid: int | None = pid  # until reaped
        self._fd: int | None = read

    def result(self, timeout: float | None = None) -> np.ndarray:
        """The [1, dims] float32 vector; EarlyFailed when the child gave none. `timeout` is
        taken for the Future protocol and not used: the child ends (or dies) on its own,
        and the model's first load there may build its graph (seconds)."""
        import numpy as np

        if self._fd is None:
            raise EarlyFailed("already read")
        chunks: list[bytes] = []
        try:
            while block := os.read(self._fd, 1 << 16):
                chunks.append(block)
        except OSError as exc:
            raise EarlyFailed(str(exc)) from None
        finally:
            self._close(kill=False)
        data = b"".join(chunks)
        if len(data) < _SHAPE.size:
            raise EarlyFailed("the child ended without a vector")
        rows, dims = _SHAPE.unpack_from(data)
        body = data[_SHAPE.size :]
        if rows != 1 or len(body) != rows * dims * 4:
            raise EarlyFailed("the child's answer is malformed")
        return np.frombuffer(body, dtype=np.float32).reshape(rows, dims).copy()

    def discard(self) -> None:
        self._close(kill=True)

    def _close(self, *, kill: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._pid is not None:
            if kill:
                try:
                    os.kill(self._pid, 9)
                except ProcessLookupError:
                    pass
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
            self._pid = None


def _child(embedder: Embedder, query: str, fd: int, light: bool) -> None:
    """Load, embed, write, and leave at once: no atexit handler, finaliser or buffered
    output of the parent's runs twice (os._exit), whatever happens here."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):  # the parent speaks for the search: its errors, its output
            os.dup2(devnull, stream)
        import numpy as np

        from vault_brain.embed.base import embed_queries

        vectors = np.ascontiguousarray(
            embed_queries(embedder, [query], light=light), dtype=np.float32
        )
        view = memoryview(_SHAPE.pack(*vectors.shape) + vectors.tobytes())
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:  # noqa: BLE001 - the parent learns of it by the missing answer
        pass
    finally:
        os._exit(0)
