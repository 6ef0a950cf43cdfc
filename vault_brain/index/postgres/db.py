"""The Postgres backend's index (index/port.py's `Index`): one vault's schema on a server,
the connections it lends out, the indexer's advisory lock, and the change notifications
that stand where SQLite has `PRAGMA data_version`.

Many processes (MCP servers on several hosts) may open one vault's index at once:
- reads: a pool of at most READERS connections, each read one REPEATABLE READ snapshot;
- writes: one connection per process under a thread lock, and every write transaction
  first takes a transaction advisory lock on the vault (`pg_advisory_xact_lock`), so
  writers of all processes take turns as SQLite's do, and a sync's read-then-write steps
  (who holds an id, which links resolve where) see every commit before theirs;
- the indexer role: a session advisory lock on its own connection (index/postgres/lock.py);
- each commit NOTIFYs the vault's channel; a listening thread moves a generation counter
  that values derived from the index are remembered under (the vault's languages, its
  note count, its calibration), as SQLite's reader connections remember them until
  `data_version` moves. A one-shot process (the CLI) does not listen and remembers nothing.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from pgvector.psycopg import register_vector

from vault_brain import log
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.index.pool import ReaderPool
from vault_brain.index.port import NOTE_LOCK_SECONDS
from vault_brain.index.postgres.lock import AdvisoryLock, hold_note, note_key
from vault_brain.index.postgres.schema import SCHEMA, SCHEMA_VERSION
from vault_brain.index.postgres.store import Reads, Writes

T = TypeVar("T")
READERS = 4
# Connections holding note locks at once: a Brain writes one note at a time, its summary
# queue another.
NOTE_LOCKERS = 2
# Advisory lock classes (the first of two int4 keys; the second is the vault's key).
SETUP_LOCK, WRITE_LOCK, ROLE_LOCK = 0x56420001, 0x56420002, 0x56420003
CONNECT_TIMEOUT = 10
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def schema_for(vault_path: str) -> str:
    """The schema a vault's index lives in when the URL names none: vb_, the vault
    folder's name (letters and digits), and 8 hex digits of its absolute path."""
    name = vault_path.rstrip("/").rsplit("/", 1)[-1].lower()
    slug = re.sub(r"[^a-z0-9]+", "_", name).strip("_")[:40] or "vault"
    digest = hashlib.blake2b(vault_path.encode("utf-8", "surrogatepass"), digest_size=4)
    return f"vb_{slug}_{digest.hexdigest()}"


def split_url(url: str, vault_path: str) -> tuple[str, str]:
    """(the URL to connect to, the schema): `?schema=NAME` in index.url names the schema
    (the same on every host that shares the vault), else schema_for(vault_path)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in query if k == "schema"]
    rest = [(k, v) for k, v in query if k != "schema"]
    schema = named[-1] if named else schema_for(vault_path)
    if not _SCHEMA_NAME.match(schema):
        raise ConfigError(
            [f"index.url: schema {schema!r} must be lowercase letters, digits and _ (≤ 63)"]
        )
    return urlunsplit(parts._replace(query=urlencode(rest, safe="/", quote_via=quote))), schema


def public_location(url: str, schema: str) -> str:
    """The URL as status shows it: no password."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = parse_qsl(parts.query) + [("schema", schema)]
    return urlunsplit(
        parts._replace(netloc=netloc, query=urlencode(query, safe="/", quote_via=quote))
    )


def lock_key(schema: str) -> int:
    """The vault's second advisory-lock key: 31 bits of its schema's hash."""
    digest = hashlib.blake2b(schema.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def _idle(conn: Any) -> None:
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.execute("ROLLBACK")


def reader_pool(opener: Callable[[], Any], size: int = READERS) -> ReaderPool:
    """Connections lent to any thread (index/pool.py); one the server closed is dropped."""
    return ReaderPool(
        opener, size, reset=_idle, errors=(psycopg.Error,), usable=lambda conn: not conn.closed
    )


class Changes:
    """Listens on the vault's channel; every notification (a commit by any process) moves
    `generation`. Remembered values are kept under the generation they were computed at;
    while the listener is down nothing is remembered."""

    def __init__(self, opener: Callable[[], Any], channel: str) -> None:
        self._open = opener
        self._channel = channel
        self.generation = 0
        self.listening = False
        self._memo: dict[str, tuple[int, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vault-brain-pg-listen", daemon=True)
        self._thread.start()

    def bump(self) -> None:
        self.generation += 1

    def remembered(self, name: str, compute: Callable[[], T]) -> T:
        if not self.listening:
            return compute()
        generation = self.generation
        kept = self._memo.get(name)
        if kept is not None and kept[0] == generation:
            return kept[1]
        value = compute()
        self._memo[name] = (generation, value)
        return value

    def _run(self) -> None:
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._open()
                conn.execute(f'LISTEN "{self._channel}"')
                self.listening = True
                self.bump()  # anything may have changed while nobody listened
                while not self._stop.is_set():
                    for _ in conn.notifies(timeout=0.1):
                        self.bump()
            except Exception as exc:  # noqa: BLE001 - the listener keeps trying
                if not self._stop.is_set():
                    log.warn("index_listen_failed", error=log.cut(str(exc), 200))
            finally:
                self.listening = False
                self.bump()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
            self._stop.wait(1.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


READ_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"  # a read's one snapshot


class PostgresIndex:
    """One vault's index in one schema of a Postgres server with pgvector."""

    def __init__(
        self, url: str, schema: str, *, readers: int = READERS, one_shot: bool = False
    ) -> None:
        self.url = url
        self.schema = schema
        self.one_shot = one_shot
        self.key = lock_key(schema)
        self._location = public_location(url, schema)
        self._create()
        self._write_lock = threading.Lock()
        self._writer: Any = None
        self._pool = reader_pool(self._connect, readers)
        self._lockers = reader_pool(
            lambda: self._connect(register=False, keepalive=True), NOTE_LOCKERS
        )
        self._closed = False
        self._lock = AdvisoryLock(
            lambda: self._connect(register=False, keepalive=True),
            ROLE_LOCK,
            self.key,
            f"advisory lock ({ROLE_LOCK}, {self.key}) on {self._location}",
            self._probe_lock,
        )
        self._changes = None if one_shot else Changes(self._connect_plain, schema)

    # -- connections ----------------------------------------------------------------------

    def _connect_plain(self) -> Any:
        return self._connect(register=False)

    def _connect(self, register: bool = True, keepalive: bool = False) -> Any:
        extra: dict[str, Any] = {}
        if keepalive:  # a dead holder's lock goes within seconds, across hosts too
            extra = {
                "keepalives": 1,
                "keepalives_idle": 5,
                "keepalives_interval": 2,
                "keepalives_count": 3,
            }
        try:
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT, **extra
            )
        except psycopg.Error as exc:
            raise Unavailable(f"cannot reach the index server {self._location}: {exc}") from exc
        try:
            conn.execute(f'SET search_path = "{self.schema}", public')
            if keepalive:
                conn.execute("SET tcp_keepalives_idle = 5")
                conn.execute("SET tcp_keepalives_interval = 2")
                conn.execute("SET tcp_keepalives_count = 3")
            if register:
                register_vector(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _create(self) -> None:
        """The vault's schema, made (or made anew at another SCHEMA_VERSION) under an
        advisory lock, so processes that open one vault at once make it once."""
        conn = self._connect(register=False)
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (SETUP_LOCK,))
            if (
                conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
                is None
            ):
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.Error as exc:
                    raise Unavailable(
                        f"the index server {self._location} lacks pgvector and this user cannot "
                        f"add it ({exc}); run CREATE EXTENSION vector as a superuser"
                    ) from exc
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (SETUP_LOCK, self.key))
            version = None
            exists = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone()
            if exists:
                row = conn.execute(
                    f"SELECT to_regclass('\"{self.schema}\".meta') IS NOT NULL"
                ).fetchone()
                if row[0]:
                    found = conn.execute(
                        f"SELECT value FROM \"{self.schema}\".meta WHERE key = 'schema_version'"
                    ).fetchone()
                    version = int(found[0]) if found else None
                if version != SCHEMA_VERSION:
                    log.warn("index_schema_changed", found=version, want=SCHEMA_VERSION)
                    conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
            if version != SCHEMA_VERSION:
                conn.execute(f'CREATE SCHEMA "{self.schema}"')
                conn.execute(f'SET LOCAL search_path = "{self.schema}", public')
                conn.execute(SCHEMA)  # one round trip: no parameters in it
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s)",
                    (str(SCHEMA_VERSION),),
                )
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            raise Unavailable(f"the index {self._location} cannot be opened: {exc}") from exc
        finally:
            conn.close()

    # -- the port ---------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return self._location

    @property
    def folder(self) -> None:
        """A server index writes no files beside the vault."""
        return None

    @property
    def indexer_lock(self) -> AdvisoryLock:
        return self._lock

    @contextmanager
    def note_lock(self, path: str, timeout: float = NOTE_LOCK_SECONDS) -> Iterator[None]:
        """A session advisory lock keyed by this vault's schema and the note's name, on a
        connection of its own: writers to one note on every host take turns."""
        with self._lockers.connection() as conn:
            with hold_note(conn, note_key(self.schema, path), timeout, self._location):
                yield

    def _remembered(self) -> Callable[[str, Callable[[], Any]], Any] | None:
        return self._changes.remembered if self._changes is not None else None

    @contextmanager
    def read(self) -> Iterator[Reads]:
        """Named read queries on one snapshot (REPEATABLE READ): never waits for writers."""
        with self._pool.connection() as conn:
            try:  # BEGIN goes with the first query (Reads._execute)
                yield Reads(conn, self, self._remembered(), READ_BEGIN)
            except psycopg.Error as exc:
                raise self._error(exc, "read") from exc
            finally:
                try:
                    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        conn.execute("ROLLBACK")
                except psycopg.Error:
                    pass

    @contextmanager
    def read_elsewhere(self) -> Iterator[Reads]:
        """Not offered (change_mark is None): a forked child would need a snapshot
        exported to it, and a connection of its own costs more than a one-shot search
        gains."""
        raise Unavailable("no read elsewhere on a Postgres index")
        yield  # pragma: no cover - a generator, for contextmanager

    def change_mark(self) -> None:
        """None: no read elsewhere stands in for one here (see read_elsewhere)."""
        return None

    @contextmanager
    def beside(self, reads: Reads) -> Iterator[Reads | None]:
        """A second read on `reads`' snapshot (exported, and imported by another pooled
        connection), for another thread to query while `reads` is busy: a hybrid search's
        KNN runs beside its full-text ranking, each on its own server process. None when
        no connection is free right now, and in a one-shot process (a connection opened
        for one search costs more than the overlap saves)."""
        if self.one_shot:
            yield None
            return
        with self._pool.spare() as conn:
            if conn is None:
                yield None
                return
            try:
                snapshot = reads.export_snapshot()
                yield Reads(
                    conn,
                    self,
                    self._remembered(),
                    (READ_BEGIN, f"SET TRANSACTION SNAPSHOT '{snapshot}'"),
                )
            except psycopg.Error as exc:
                raise self._error(exc, "read") from exc
            finally:
                _rollback(conn)

    @contextmanager
    def transaction(self) -> Iterator[Writes]:
        """One write transaction; writers of every process take turns on the vault's
        transaction advisory lock. Never nested."""
        with self._write_lock:
            if self._closed:
                raise Unavailable("the index is closed")
            conn = self._writer_connection()
            try:
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (WRITE_LOCK, self.key))
                writes = Writes(conn, self)
                try:
                    yield writes
                    writes.flush()
                    conn.execute("SELECT pg_notify(%s, '')", (self.schema,))
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            except psycopg.Error as exc:
                raise self._error(exc, "written") from exc
            finally:
                if self._changes is not None:
                    self._changes.bump()

    def _writer_connection(self) -> Any:
        if self._writer is None or self._writer.closed:
            self._writer = self._connect()
        return self._writer

    def _error(self, exc: BaseException, doing: str) -> Unavailable:
        return Unavailable(f"the index {self._location} cannot be {doing}: {exc}")

    def _probe_lock(self, classid: int, objid: int) -> str | None:
        """The application_name of the connection holding this advisory lock ('' when it
        set none), or None when nobody holds it."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT coalesce(a.application_name, '') FROM pg_locks l "
                "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s "
                "AND l.objsubid = 2 AND l.granted "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (classid, objid),
            ).fetchone()
        return None if row is None else row[0]

    # -- chores -----------------------------------------------------------------------------

    def maintain(self) -> None:
        """Fresh planner statistics after big changes (a first index): ANALYZE the tables
        that changed by a fifth since their last one; autovacuum does the rest. First the
        postings' impacts, if the notes' mean length moved (index/postgres/fulltext.py)."""
        with self.read() as r:
            stale = r.stale_impacts() is not None
        if stale:
            with self.transaction() as w:
                w.refresh_impacts()
        try:
            with self._pool.connection() as conn:
                stale = conn.execute(
                    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s "
                    "AND n_mod_since_analyze > greatest(1000, n_live_tup / 5)",
                    (self.schema,),
                ).fetchall()
                for (table,) in stale:
                    conn.execute(f'ANALYZE "{self.schema}"."{table}"')
        except psycopg.Error as exc:
            raise self._error(exc, "maintained") from exc

    def maintain_in_background(self, on: bool = True) -> None:
        """Nothing to move: Postgres's chores never fall to a commit."""

    def repair(self, emptied: Callable[[Writes], None] | None = None) -> bool:
        """Postgres checks its own pages; nothing here can be damaged unseen, nothing is
        emptied."""
        return False

    def size_bytes(self) -> int:
        try:
            with self._pool.connection() as conn:
                row = conn.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace s ON s.oid = c.relnamespace "
                    "WHERE s.nspname = %s AND c.relkind IN ('r', 'm')",
                    (self.schema,),
                ).fetchone()
            return int(row[0])
        except (psycopg.Error, Unavailable):
            return 0

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
        if self._changes is not None:
            self._changes.close()
        self._lock.close()
        self._lockers.close()
        self._pool.close()
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def _rollback(conn: Any) -> None:
    try:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        pass


def wait_for_server(url: str, seconds: float = 30.0) -> None:
    """Until the server answers (a local one just started)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
