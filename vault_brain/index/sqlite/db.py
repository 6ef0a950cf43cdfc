"""The SQLite backend's index (index/port.py's `Index`): a SQLite binding that can load
sqlite-vec, pragmas, schema, recovery, and the connections it lends out.

Many Pythons (pyenv's default build, macOS's system Python, this machine's) ship a
`sqlite3` that cannot load extensions. We use it when it can, and fall back to
`sqlean` (a drop-in sqlite3 with extension loading) when it cannot.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from vault_brain import log
from vault_brain.errors import IndexDamaged, Unavailable, disk_full
from vault_brain.index.pool import ReaderPool
from vault_brain.index.port import NOTE_LOCK_SECONDS
from vault_brain.index.sqlite import totals
from vault_brain.index.sqlite.lock import LOCK_NAME, IndexerLock
from vault_brain.index.sqlite.schema import INDEX_NAMES, SCHEMA, SCHEMA_VERSION, missing_indexes
from vault_brain.index.sqlite.store import Reads, Writes

Connection = Any  # sqlite3.Connection or sqlean.Connection: the same DB-API shape


def _vec_extension() -> str:
    """The sqlite-vec library inside the sqlite_vec package, found without importing the
    package (its __init__ imports numpy: a full-text-only CLI call need not pay for it)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sqlite-vec is not installed: pip install sqlite-vec")
    return os.path.join(list(spec.submodule_search_locations)[0], "vec0")


def _load_vec(conn: Connection) -> None:
    conn.enable_load_extension(True)
    try:
        conn.load_extension(_vec_extension())
    finally:
        conn.enable_load_extension(False)


def _can_load_extensions(module: ModuleType) -> bool:
    try:
        conn = module.connect(":memory:")
    except Exception:
        return False
    try:
        _load_vec(conn)
        conn.execute("SELECT vec_version()")
        # Every feature the schema needs: contentless_delete came with SQLite 3.43, and a
        # system sqlite3 that loads extensions may still be older (Debian 12: 3.40).
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, content='', contentless_delete=1)")
        conn.execute("INSERT INTO t(rowid, x) VALUES (1, 'a')")
        conn.execute("DELETE FROM t WHERE rowid = 1")
        # The store corrects FTS5's totals record itself (index/sqlite/totals.py): shadow
        # tables writable, as they are unless SQLITE_DBCONFIG_DEFENSIVE is on.
        conn.execute("UPDATE t_data SET block = block WHERE id = 1")
        return True
    except Exception:
        return False
    finally:
        conn.close()


_binding: ModuleType | None = None


def pick_binding(candidates: tuple[str, ...] = ("sqlite3", "sqlean")) -> ModuleType:
    """The first importable SQLite binding that loads sqlite-vec and has what the schema
    needs (FTS5 with contentless_delete)."""
    global _binding
    if _binding is not None and candidates == ("sqlite3", "sqlean"):
        return _binding
    for name in candidates:
        try:
            module = __import__(name)
        except ImportError:
            continue
        if _can_load_extensions(module):
            if candidates == ("sqlite3", "sqlean"):
                _binding = module
            return module
    raise RuntimeError(
        "no SQLite binding here can load sqlite-vec: install sqlean-py (pip install sqlean-py)"
    )


def binding_errors() -> tuple[type[BaseException], ...]:
    """DatabaseError classes of every binding we may use, for `except` clauses."""
    errors: list[type[BaseException]] = []
    for name in ("sqlite3", "sqlean"):
        try:
            errors.append(__import__(name).DatabaseError)
        except ImportError:
            pass
    return tuple(errors)


# Pages are read through a memory map of the index, up to this many bytes of it (beyond,
# and where the platform refuses, SQLite reads as before): no read() and copy per page. The
# e5 KNN of a one-shot hybrid search reads every vector (35k on cpp-docs: 50 MB of overflow
# pages): ~25 against ~42 CPU-ms on a fresh connection. The index lives on a local disk in
# the user's cache, where a map is safe (SQLite's caveat is I/O errors on network files).
MMAP_BYTES = 1 << 30
WAL_WAIT_SECONDS = 30.0  # as long as the busy timeout: how long a new index's opener waits


def connect(path: Path | str) -> Connection:
    """A connection with sqlite-vec loaded, WAL, and a busy timeout so nobody sees 'locked'."""
    module = pick_binding()
    conn = module.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
    _load_vec(conn)
    conn.execute("PRAGMA busy_timeout = 30000")
    _use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -32000")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    return conn


def _use_wal(conn: Connection) -> None:
    """WAL, waiting up to the busy timeout for its turn. SQLite refuses the switch with
    "database is locked" at once, without the busy handler, while another connection is
    about to write a file that is not WAL yet: two processes opening a new index at the
    same moment (an `index` and a `status`, two servers' first start) met it."""
    deadline = time.monotonic() + WAL_WAIT_SECONDS
    pause = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except binding_errors() as exc:
            if "locked" not in str(exc).lower() or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _sidecar_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _move_aside(path: Path, reason: str) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for f in _sidecar_files(path):
        if f.exists():
            target = f.with_name(f"{f.name}.{reason}-{stamp}")
            try:
                os.replace(f, target)
            except OSError:
                f.unlink(missing_ok=True)
    log.warn("index_moved_aside", path=str(path), reason=reason)


def _remove(path: Path) -> None:
    for f in _sidecar_files(path):
        f.unlink(missing_ok=True)


def _schema_version(conn: Connection) -> int | None:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if row is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else None


def _create_schema(conn: Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _schema_version(conn) is None:
            for statement in SCHEMA.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("INSERT INTO meta(key, value) VALUES (?, '1')", (totals.RECOUNTED,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _recount_text_totals(conn: Connection) -> None:
    """An index whose full-text totals were written before they were kept true across
    deletes (index/sqlite/totals.py) gets them recounted from its rows, once: its scores
    are then a fresh index's without a rebuild (which would embed every chunk again). An
    index that cannot be written now (a read-only file) is recounted by a later open."""
    done = "SELECT 1 FROM meta WHERE key = ?"

    def recount() -> None:
        totals.recount(conn)
        conn.execute("INSERT INTO meta(key, value) VALUES (?, '1')", (totals.RECOUNTED,))

    _upgrade_once(
        conn,
        lambda: not conn.execute(done, (totals.RECOUNTED,)).fetchone(),
        recount,
        "index_totals_not_recounted",
    )


def _add_missing_indexes(conn: Connection) -> None:
    """Every index the schema names, made where it is missing, once: an index made before
    one of them (the stat pass's covering index, schema.STAT_INDEX: ~10 ms at 10k notes)
    gets it without a rebuild, and a first index that died before its end (it makes the
    indexes of schema.PUT_OFF there) gets those. An index that cannot be written now is
    given them by a later open."""

    def missing() -> list[str]:
        return missing_indexes(row[0] for row in conn.execute(INDEX_NAMES))

    def add() -> None:
        for sql in missing():
            conn.execute(sql)

    _upgrade_once(conn, lambda: bool(missing()), add, "index_indexes_not_added")


def _upgrade_once(
    conn: Connection, needed: Callable[[], bool], apply: Callable[[], object], event: str
) -> None:
    """An in-place upgrade of an older index: `apply` in one write transaction when
    `needed()` says so (asked again under the lock: another process may have done it). A
    damaged file raises; any other failure (read-only, busy) is logged as `event` and left
    to a later open."""
    if not needed():
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if needed():
                apply()
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    except binding_errors() as exc:
        if is_damage(exc):
            raise
        log.warn(event, error=str(exc)[:200])


def is_damage(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def is_full(exc: BaseException) -> bool:
    return "database or disk is full" in str(exc).lower()


def index_error(exc: BaseException, path: Path, doing: str) -> Unavailable:
    """What a SQLite failure means to a user, with the real cause (a full disk, a read-only
    or immutable file, damage), never a traceback."""
    if is_damage(exc):
        return IndexDamaged(f"the index {path} is damaged ({exc}); it is being rebuilt")
    if is_full(exc):
        return disk_full(f"the index {path}", written=f"the index cannot be {doing}")
    return Unavailable(f"the index {path} cannot be {doing}: {exc}")


def open_database(path: Path) -> Connection:
    """Open (or build) the index. Wrong schema version → rebuilt; damaged file → moved
    aside and rebuilt; a folder or file that cannot be used → Unavailable, said plainly."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise Unavailable(
            f"cannot use {path.parent} as the index folder: a file stands there"
        ) from exc
    except OSError as exc:
        raise Unavailable(f"cannot create the index folder {path.parent}: {exc}") from exc
    errors = binding_errors()
    for attempt in range(3):
        try:
            conn = connect(path)
            version = _schema_version(conn)
            if version is not None and version != SCHEMA_VERSION:
                conn.close()
                log.warn("index_schema_changed", found=version, want=SCHEMA_VERSION)
                _remove(path)
                continue
            if version is None:
                _create_schema(conn)
            else:
                _recount_text_totals(conn)
                _add_missing_indexes(conn)
            conn.execute("SELECT count(*) FROM notes").fetchone()
            return conn
        except errors as exc:
            if attempt == 2 or not is_damage(exc):
                raise index_error(exc, path, "opened") from exc
            _move_aside(path, "corrupt")
            log.warn("index_corrupt", error=str(exc)[:200])
    raise RuntimeError("unreachable")


# --- the index as the rest of the code sees it ---------------------------------------------

READERS = 4  # read connections an index lends out at once; more callers wait their turn
# WAL pages past which a commit copies the WAL into the database itself (SQLite's default),
# and the far bound it keeps where a background thread checkpoints instead.
AUTOCHECKPOINT_PAGES = 1000
FAR_CHECKPOINT_PAGES = 4000


def _end_read(conn: Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def reader_pool(opener: Callable[[], Connection], size: int = READERS) -> ReaderPool:
    """Read connections (index/pool.py); borrowing never waits for the writer (WAL readers
    do not block on it)."""
    return ReaderPool(opener, size, reset=_end_read, errors=binding_errors())


class SqliteIndex:
    """The sidecar: one write connection used under one lock, a bounded pool of readers,
    and the in-memory copy of the vectors. Nothing outside index/sqlite/ sees a connection:
    it reads through `read()` and writes through `transaction()` (index/port.py's Index)."""

    def __init__(self, path: Path, *, readers: int = READERS, one_shot: bool = False) -> None:
        self.path = Path(path)
        # A one-shot process (a CLI command) searches once: it scans sqlite-vec's chunks of
        # vectors (matrix.scan) instead of holding a copy of them all first.
        self.one_shot = one_shot
        self._conn = open_database(self.path)
        self._write_lock = threading.Lock()
        self._wal_overgrown = False  # a write failed on a full disk: see transaction()
        self._matrices: dict[str, Any] = {}
        self._pool = reader_pool(lambda: connect(self.path), readers)
        self._closed = False
        self._commits = 0  # by this process (change_mark)
        # One indexer per vault: an flock beside the index file (index/sqlite/lock.py).
        self._lock = IndexerLock(self.path.parent / LOCK_NAME)

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def folder(self) -> Path:
        """index.db, its -wal and -shm and the indexer lock live here."""
        return self.path.parent

    @property
    def indexer_lock(self) -> IndexerLock:
        return self._lock

    @contextmanager
    def note_lock(self, path: str, timeout: float = NOTE_LOCK_SECONDS) -> Iterator[None]:
        """Nothing beyond the vault's own flock, which every write takes around its check
        and rename (vault/locks.py): every process that shares a SQLite index runs on the
        host that holds its file."""
        yield

    def matrix_of(self, tier: str) -> Any:
        """A tier's in-memory vectors (index/sqlite/matrix.py), made on first use: a process
        that only searches full text never imports numpy."""
        matrix = self._matrices.get(tier)
        if matrix is None:
            from vault_brain.index.sqlite.matrix import VectorMatrix

            matrix = self._matrices.setdefault(tier, VectorMatrix())
        return matrix

    def vectors_in_memory(self) -> int:
        """How many chunk vectors this process holds in memory (0 in a one-shot process)."""
        return sum(m.rows() for m in self._matrices.values())

    @contextmanager
    def read(self) -> Iterator[Reads]:
        """Named read queries on one consistent snapshot of the index."""
        errors = binding_errors()
        with self._pool.connection() as conn:
            try:
                conn.execute("BEGIN")
                try:
                    yield Reads(conn, self, self._pool.memo(conn))
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except errors as exc:
                raise index_error(exc, self.path, "read") from exc

    @contextmanager
    def read_elsewhere(self) -> Iterator[Reads]:
        """A read on a connection of its own, opened for it and closed after: a forked
        child's (search/semantic.py), which must not touch its parent's connections. Its
        parent keeps its own open until the child is reaped (a child's connection shares
        its parent's file locks in SQLite's bookkeeping, not in the kernel's)."""
        with _read_on_own_connection(self.path, self) as reads:
            yield reads

    def change_mark(self) -> tuple[int, int] | None:
        """The same value as long as no connection, of any process, commits to the index:
        this process's commits counted, and the write connection's `PRAGMA data_version`
        (which moves when another connection commits). None once closed."""
        with self._write_lock:
            if self._closed:
                return None
            try:
                version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            except binding_errors():
                return None
            return self._commits, version

    @contextmanager
    def beside(self, reads: Reads) -> Iterator[None]:
        """No second connection shares a SQLite read's snapshot: the caller reads in turn
        (and a search's statements here take a few milliseconds of this process's CPU,
        which a second thread would not add to)."""
        yield None

    @contextmanager
    def transaction(self) -> Iterator[Writes]:
        """One write transaction (BEGIN IMMEDIATE … COMMIT), serialised in this process by a
        lock and across processes by SQLite's own. Never nested."""
        with self._write_lock:
            if self._closed:
                raise Unavailable("the index is closed")
            conn = self._conn
            errors = binding_errors()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    writes = Writes(conn, self)
                    yield writes
                except BaseException:
                    _rollback(conn)
                    raise
                try:
                    writes.finish()
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
                finally:
                    self._commits += 1  # a failed COMMIT too: the mark only ever moves
            except errors as exc:
                if is_full(exc):
                    self._wal_overgrown = True
                raise index_error(exc, self.path, "written") from exc
            if self._wal_overgrown:
                # A transaction that failed on a full disk had grown the WAL into the last
                # free bytes, and SQLite keeps a WAL's size, so that space stayed taken
                # after the person freed some: the next write (a kept version, a note)
                # failed again. Now that a write went through, give it back.
                self._wal_overgrown = not _give_back_wal(conn)

    # -- chores (index/port.py: maintain, maintain_in_background, repair) ------------------

    def maintain(self) -> None:
        """Copy the WAL the saves and syncs wrote into the database (see checkpoint)."""
        self.checkpoint()

    def maintain_in_background(self, on: bool = True) -> None:
        """Say that a background thread calls `maintain()` after writes: a commit then
        copies the WAL into the database only past FAR_CHECKPOINT_PAGES (a stalled thread),
        so a save no longer pays the copy and its syncs (84-108 ms when it fell to one)."""
        pages = FAR_CHECKPOINT_PAGES if on else AUTOCHECKPOINT_PAGES
        with self._write_lock:
            if not self._closed:
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")

    def repair(self, emptied: Callable[[Writes], None] | None = None) -> bool:
        """FTS5's integrity check: damaged pages give wrong answers silently, so damaged
        full-text tables are dropped and made anew (empty), `emptied` called in that
        transaction; True then, and the caller's next pass must index every note again."""
        try:
            with self.transaction() as w:
                w.check_text_index()
            return False
        except IndexDamaged as exc:
            log.warn("index_damaged", part="full text", error=log.cut(exc.message, 200))
        try:
            with self.transaction() as w:
                w.reset_text_index()
                if emptied is not None:
                    emptied(w)
        except IndexDamaged:
            # The tables' own pages are damaged: DROP, which walks them, cannot free them.
            with self.transaction() as w:
                w.forget_text_index()
                if emptied is not None:
                    emptied(w)
        return True

    def checkpoint(self) -> tuple[bool, int]:
        """Copy the WAL into the database without waiting for readers or writers (PASSIVE),
        on a reader connection, so writes go on meanwhile. Returns (the whole WAL was
        copied, frames copied)."""
        errors = binding_errors()
        with self._pool.connection() as conn:
            try:
                busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except errors as exc:
                raise index_error(exc, self.path, "written") from exc
        return not busy and copied == frames, max(copied, 0)

    @property
    def readers_opened(self) -> int:
        return self._pool.opened

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in _sidecar_files(self.path)[:2] if f.exists())

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._pool.close()
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


class ForkedReader:
    """The index as a process forked before its parent opened it reads it (index/factory.py
    open_reader): a connection of its own per read, to a file that exists with this
    schema; nothing made, moved, upgraded or written (the parent does that)."""

    one_shot = True  # as SqliteIndex's: a scan of sqlite-vec's chunks, nothing held

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._matrices: dict[str, Any] = {}

    matrix_of = SqliteIndex.matrix_of  # the query's noise level, where it is needed

    @contextmanager
    def read(self) -> Iterator[Reads]:
        if not self.path.is_file():  # connecting would make an empty one
            raise Unavailable(f"no index at {self.path} yet")
        with _read_on_own_connection(self.path, self, schema_checked=True) as reads:
            yield reads


@contextmanager
def _read_on_own_connection(
    path: Path, owner: Any, *, schema_checked: bool = False
) -> Iterator[Reads]:
    """One read transaction on a connection opened for it and closed after (a forked
    child's reads: never its parent's connections)."""
    errors = binding_errors()
    try:
        conn = connect(path)
    except errors as exc:
        raise index_error(exc, path, "read") from exc
    try:
        conn.execute("BEGIN")
        if schema_checked and _schema_version(conn) != SCHEMA_VERSION:
            raise Unavailable("the index is of another schema")
        yield Reads(conn, owner)
    except errors as exc:
        raise index_error(exc, path, "read") from exc
    finally:
        conn.close()


def _give_back_wal(conn: Connection) -> bool:
    """Copy the WAL into the database and truncate it, if no reader needs it right now (no
    waiting: best effort). Whether it did."""
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.execute("PRAGMA busy_timeout = 30000")
    except binding_errors():
        return False
    return True


def _rollback(conn: Connection) -> None:
    # SQLite may have rolled back already (a full disk): a second ROLLBACK would raise
    # "no transaction is active" and hide the real error.
    if conn.in_transaction:
        conn.execute("ROLLBACK")
