"""Opening the sidecar: a SQLite binding that can load sqlite-vec, pragmas, schema, recovery.

Many Pythons (pyenv's default build, macOS's system Python, this machine's) ship a
`sqlite3` that cannot load extensions. We use it when it can, and fall back to
`sqlean` (a drop-in sqlite3 with extension loading) when it cannot.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlite_vec

from vault_brain import log
from vault_brain.index.schema import SCHEMA, SCHEMA_VERSION

Connection = Any  # sqlite3.Connection or sqlean.Connection: the same DB-API shape


def _can_load_extensions(module: ModuleType) -> bool:
    try:
        conn = module.connect(":memory:")
    except Exception:
        return False
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.execute("SELECT vec_version()")
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return True
    except Exception:
        return False
    finally:
        conn.close()


_binding: ModuleType | None = None


def pick_binding(candidates: tuple[str, ...] = ("sqlite3", "sqlean")) -> ModuleType:
    """The first importable SQLite binding that loads sqlite-vec and has FTS5."""
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


def connect(path: Path | str, *, readonly: bool = False) -> Connection:
    """A connection with sqlite-vec loaded, WAL, and a busy timeout so nobody sees 'locked'."""
    module = pick_binding()
    conn = module.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA busy_timeout = 30000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -32000")
    return conn


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
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def open_index(path: Path) -> Connection:
    """Open (or build) the index. Wrong schema version → rebuilt; corrupt file → moved aside."""
    path.parent.mkdir(parents=True, exist_ok=True)
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
            conn.execute("SELECT count(*) FROM notes").fetchone()
            return conn
        except errors as exc:
            if attempt == 2:
                raise
            _move_aside(path, "corrupt")
            log.warn("index_corrupt", error=str(exc)[:200])
    raise RuntimeError("unreachable")
