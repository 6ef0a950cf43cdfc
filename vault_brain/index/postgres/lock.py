"""The Postgres backend's locks on the server: one indexer per vault (a session advisory
lock, index/port.py's `RoleLock`) and one writer per note (`hold_note`, the port's
`Index.note_lock`).

Held on a connection of its own for as long as this process indexes. The server drops it
the moment that connection ends: a process that exits or is killed closes it at once; a
host that vanishes is noticed by TCP keepalives (5 s idle, then 3 probes 2 s apart, set
on both ends), so a waiting server on another host takes the role over within seconds.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from vault_brain import log
from vault_brain.errors import Unavailable
from vault_brain.index.records import Holder
from vault_brain.vault.paths import name_key

APP_PREFIX = "vault-brain indexer:"  # application_name of the holding connection: +role:pid


class AdvisoryLock:
    def __init__(
        self,
        opener: Callable[[], Any],
        classid: int,
        objid: int,
        where: str,
        probe: Callable[[int, int], str | None],
    ) -> None:
        self._open = opener
        self._keys = (classid, objid)
        self._where = where
        self._probe = probe
        self._guard = threading.Lock()
        self._conn: Any = None
        self._held = False

    @property
    def where(self) -> str:
        return self._where

    @property
    def held(self) -> bool:
        conn = self._conn
        return self._held and conn is not None and not conn.closed

    def try_acquire(self, role: str | None = None) -> bool:
        """Take the lock if it is free; `role` (records.WATCH, INDEX, REFRESH) and this
        pid go into the lock connection's application_name, where holder() reads them."""
        with self._guard:
            if self.held:
                return True
            self._held = False
            if self._conn is None or self._conn.closed:
                self._conn = self._open()  # kept between turns: a sync asks each pass
            try:
                got = self._conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", self._keys
                ).fetchone()[0]
            except psycopg.Error as exc:
                self._drop()
                raise Unavailable(f"cannot ask for the indexer lock {self._where}: {exc}") from exc
            if not got:
                return False
            self._held = True
            name = f"{APP_PREFIX}{role or ''}:{os.getpid()}"
            try:
                self._conn.execute("SELECT set_config('application_name', %s, false)", (name,))
            except psycopg.Error:
                pass  # the lock still works; others only learn less about its holder
            log.event("indexer_lock_acquired", path=self._where, pid=os.getpid(), role=role)
            return True

    def release(self) -> None:
        with self._guard:
            if not self._held:
                return
            self._held = False
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", self._keys)
            except psycopg.Error:
                self._drop()  # the lock went with the connection
            log.event("indexer_lock_released", path=self._where, pid=os.getpid())

    def close(self) -> None:
        """Give the lock up and close its connection (the index closes)."""
        self.release()
        with self._guard:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def taken(self) -> bool:
        if self.held:
            return True
        try:
            return self._probe(*self._keys) is not None
        except (psycopg.Error, Unavailable):
            return False

    def holder(self) -> Holder | None:
        """Who holds the lock (maybe this process), read from the holding connection's
        application_name; None when nobody does."""
        try:
            name = self._probe(*self._keys)
        except (psycopg.Error, Unavailable):
            return None
        if name is None:
            return None
        if not name.startswith(APP_PREFIX):
            return Holder(None, None)
        role, _, pid = name[len(APP_PREFIX) :].rpartition(":")
        return Holder(int(pid) if pid.isdigit() else None, role or None)

    def __enter__(self) -> AdvisoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# --- one writer per note ---------------------------------------------------------------


def note_key(schema: str, path: str) -> int:
    """The advisory lock key of a note: 64 bits of a hash of the vault's schema and the
    note's name as a case- and normalisation-insensitive disk sees it (vault/paths.py's
    name_key, as the vault's own lock files are keyed), so two spellings of one name share
    it. One-key locks never meet the two-key ones of the vault (setup, writes, the role)."""
    named = f"{schema}/{name_key(path)}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(named, digest_size=8).digest(), "big", signed=True)


@contextmanager
def hold_note(conn: Any, key: int, timeout: float, where: str) -> Iterator[None]:
    """A session advisory lock on `key` held on `conn` (a connection of its own, with TCP
    keepalives) inside the block. The server drops it when the connection ends: a writer
    killed mid-write frees the note at once, one on a vanished host within seconds."""
    try:
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false)", (f"{max(1, round(timeout * 1000))}ms",)
        )
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.errors.LockNotAvailable as exc:
        raise Unavailable("another write to this note is in progress; try again") from exc
    except psycopg.Error as exc:
        conn.close()  # whatever state it is in, it holds nothing now
        raise Unavailable(f"cannot take the note's lock on {where}: {exc}") from exc
    try:
        yield
    finally:
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except psycopg.Error:
            conn.close()  # the lock went with the connection
