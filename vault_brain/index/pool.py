"""A bounded set of connections lent to whichever thread asks (datasette's shape), for any
backend: each backend says how to open one, how to end a transaction left open on it, and
whether one is still usable.

Threads come and go (anyio retires idle workers after ~10 s), so connections are never
tied to a thread: a reader borrows one, gives it back, and at most `size` ever exist.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from vault_brain.errors import Unavailable

Connection = Any  # a DB-API connection of the backend's client


class ReaderPool:
    def __init__(
        self,
        opener: Callable[[], Connection],
        size: int,
        *,
        reset: Callable[[Connection], None],
        errors: tuple[type[BaseException], ...],
        usable: Callable[[Connection], bool] = lambda conn: True,
    ) -> None:
        """`reset(conn)` ends a transaction left open on a connection given back; when it
        raises one of `errors`, or `usable(conn)` is False (the server closed it), the
        connection is closed instead of kept."""
        self._open = opener
        self._size = max(1, size)
        self._reset = reset
        self._errors = errors
        self._usable = usable
        self._idle: list[Connection] = []
        self._memos: dict[int, dict] = {}  # per live connection: values remembered on it
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False

    @property
    def opened(self) -> int:
        """Connections that exist right now (idle or lent out)."""
        return self._count

    def memo(self, conn: Connection) -> dict:
        """The values remembered on this connection (dropped with it)."""
        return self._memos.setdefault(id(conn), {})

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            self._give(conn)

    @contextmanager
    def spare(self) -> Iterator[Connection | None]:
        """A connection if one is idle or may be opened now, else None at once (no
        waiting): for work that has another way to be done (a second, concurrent read)."""
        conn = self._take(wait=False)
        if conn is None:
            yield None
            return
        try:
            yield conn
        finally:
            self._give(conn)

    def _take(self, wait: bool = True) -> Connection | None:
        with self._cond:
            while True:
                if self._closed:
                    if not wait:
                        return None
                    raise Unavailable("the index is closed")
                while self._idle:
                    conn = self._idle.pop()
                    if self._usable(conn):
                        return conn
                    self._memos.pop(id(conn), None)
                    self._count -= 1
                if self._count < self._size:
                    self._count += 1
                    break
                if not wait:
                    return None
                self._cond.wait()
        try:
            return self._open()  # outside the lock: opening may take a while
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _give(self, conn: Connection) -> None:
        try:
            self._reset(conn)
        except self._errors:
            self._discard(conn)
            return
        with self._cond:
            if not self._closed and self._usable(conn):
                self._idle.append(conn)
                self._cond.notify()
                return
        self._discard(conn)

    def _discard(self, conn: Connection) -> None:
        self._memos.pop(id(conn), None)
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        with self._cond:
            self._count -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)
