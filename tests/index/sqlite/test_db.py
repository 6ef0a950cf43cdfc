"""The SQLite backend's file: a binding that loads sqlite-vec everywhere, recovery from
damage, reader connections, and the WAL's checkpoints."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from tests.settle import settle
from tests.waiting import HANG_SECONDS
from vault_brain.index.sqlite import db
from vault_brain.index.sqlite.schema import SCHEMA_VERSION
from vault_brain.service import Brain


def test_a_binding_that_loads_sqlite_vec_is_always_found():
    module = db.pick_binding()
    conn = db.connect(":memory:")
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    assert module.__name__ in ("sqlite3", "sqlean")


def test_a_stdlib_sqlite3_without_extension_loading_falls_back_to_sqlean():
    stdlib_can_load = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
    chosen = db.pick_binding(("sqlite3", "sqlean"))
    if stdlib_can_load:
        assert chosen.__name__ == "sqlite3"
    else:  # pyenv's default build, macOS's system Python, this machine's Python
        assert chosen.__name__ == "sqlean"
    assert db.pick_binding(("sqlean",)).__name__ == "sqlean"


def test_a_corrupt_index_is_moved_aside_and_rebuilt(vault, make_brain):
    vault.write("a.md", "# A\n\nalpaca\n")
    brain = make_brain()
    path = brain.settings.index_path
    brain.close()
    path.write_bytes(b"this is not a SQLite database at all" * 100)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    rebuilt = make_brain()
    assert rebuilt.search("alpaca", mode="fts").hits[0].path == "a.md"
    aside = [p.name for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert aside, "the damaged file is kept for inspection, not deleted"


def test_a_deleted_index_is_rebuilt_from_the_files(vault, make_brain):
    vault.write("a.md", "# A\n\nalpaca\n")
    brain = make_brain()
    before = brain.snapshot()
    brain.close()
    for f in brain.settings.index_path.parent.glob("index.db*"):
        f.unlink()
    assert make_brain().snapshot() == before


def test_a_schema_version_mismatch_rebuilds_automatically(vault, make_brain):
    vault.write("a.md", "# A\n\nalpaca\n")
    brain = make_brain()
    brain.close()
    conn = db.connect(brain.settings.index_path)
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 99),)
    )
    conn.execute("DROP TABLE chunks_fts")
    conn.close()
    rebuilt = make_brain()
    assert rebuilt.search("alpaca", mode="fts").hits[0].path == "a.md"


def test_readers_in_other_connections_never_see_locked(vault, make_brain):
    import threading

    for i in range(50):
        vault.write(f"n{i}.md", f"# Note {i}\n\nshared word okapi {i}\n")
    brain = make_brain()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(30):
                brain.search("okapi", mode="fts")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    for i in range(30):
        vault.write(f"n{i}.md", f"# Note {i}\n\nshared word okapi edited {i}\n")
        brain.sync()
    for t in readers:
        t.join()
    assert errors == []


def test_a_value_remembered_on_a_reader_is_recomputed_after_any_commit(tmp_path):
    """Reads.per_version: kept on a reader connection until this process or another one
    commits to the index, never longer."""
    index = db.SqliteIndex(tmp_path / "index.db", readers=1)
    other = db.SqliteIndex(tmp_path / "index.db")  # another process's connections
    computed = []

    def remembered() -> str | None:
        with index.read() as reads:
            return reads.per_version("k", lambda: computed.append(1) or reads.get_meta("k"))

    try:
        assert [remembered(), remembered()] == [None, None] and len(computed) == 1
        with index.transaction() as w:
            w.set_meta("k", "mine")
        assert [remembered(), remembered()] == ["mine", "mine"] and len(computed) == 2
        with other.transaction() as w:
            w.set_meta("k", "theirs")
        assert remembered() == "theirs" and len(computed) == 3
        with index.transaction() as w:  # the write connection itself never remembers
            assert [w.per_version("k", lambda: "fresh") for _ in range(2)] == ["fresh"] * 2
    finally:
        other.close()
        index.close()


def _database_written(path) -> tuple[int, int]:
    """The main database file's (size, mtime): in WAL mode only a checkpoint writes it."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _small_commits(index: db.SqliteIndex, count: int) -> None:
    for i in range(count):
        with index.transaction() as w:
            w.set_meta(f"k{i % 50}", "x" * 2000)


def test_commits_leave_the_checkpoint_to_whoever_said_they_would_do_it(tmp_path):
    """A commit that crosses SQLite's autocheckpoint copies the WAL into the database and
    syncs it: 84-108 ms inside one save. Where a background thread checkpoints instead
    (`maintain_in_background`), commits never do it below a far bound, and `checkpoint()`
    (what `maintain()` does) copies the whole WAL on a reader connection."""
    path = tmp_path / "index.db"
    index = db.SqliteIndex(path)
    try:
        before = _database_written(path)
        _small_commits(index, 400)  # ~2,000 WAL frames: past SQLite's 1,000
        assert _database_written(path) != before  # a commit checkpointed

        index.maintain_in_background()
        assert index.checkpoint()[0]  # nothing left in the WAL to copy
        before = _database_written(path)
        _small_commits(index, 400)  # and below the far bound
        assert _database_written(path) == before  # no commit checkpointed
        complete, frames = index.checkpoint()
        assert complete and frames >= 1000
        assert _database_written(path) != before
        with index.read() as r:
            assert r.get_meta("k7") == "x" * 2000
    finally:
        index.close()


def test_the_indexer_copies_the_wal_into_the_index_after_saves_not_the_saves(vault, make_settings):
    """The WAL is copied into the database (and synced) by the background thread a moment
    after saves, on a reader connection, so no save waits for it; in WAL mode nothing
    else writes the database file."""
    with Brain(make_settings()) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        database = brain.index.path

        def written() -> tuple[int, int]:
            return database.stat().st_size, database.stat().st_mtime_ns

        before = written()
        for n in range(200):
            brain.save(f"Firing {n}", f"Bisque firing {n} at cone 04, glaze firing after.")
        settle(brain)  # the watcher has looked at every saved file; the worker is idle again
        assert written() != before  # the WAL went into the database meanwhile
        after = written()
        assert brain.index.checkpoint()[0]  # all of it is in the database now, and ...
        assert written() == after  # ... it was before this copy: the idle worker had done it


def test_connections_read_the_index_through_a_memory_map(tmp_path):
    """Reads go through SQLite's memory map (db.MMAP_BYTES), not a read() per page: the
    e5 KNN of a one-shot search over 35k vectors (50 MB of overflow pages) took ~25
    against ~42 CPU-ms on a fresh connection (docs/benchmarks.md, round 6)."""
    conn = db.connect(tmp_path / "index.db")
    try:
        assert conn.execute("PRAGMA mmap_size").fetchone()[0] == db.MMAP_BYTES >= 256 << 20
    finally:
        conn.close()


def test_the_stat_pass_reads_the_notes_stats_from_a_covering_index(vault, make_brain):
    """A one-shot search's stat pass compares the vault's (path, mtime, size) in path order
    with the notes': read from an index alone, no row of the notes table; an index made
    before that index gets it at its next open, without a rebuild, and the same stats."""
    for i in range(5):
        vault.write(f"n{i}.md", f"# N{i}\n\nword {i}\n")
    brain = make_brain()
    path = brain.settings.index_path
    with brain.index.read() as r:
        stats = r.note_stats()
    brain.close()
    query = "SELECT path, mtime_ns, size FROM notes ORDER BY path"
    conn = db.connect(path)
    try:
        plan = " ".join(str(row) for row in conn.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "COVERING INDEX notes_stat" in plan
        conn.execute("DROP INDEX notes_stat")  # as an index of the version before it
        (rowid_before,) = conn.execute("SELECT max(rowid) FROM notes").fetchone()
    finally:
        conn.close()
    reopened = make_brain(sync=False)
    with reopened.index.read() as r:
        assert r.note_stats() == stats
        assert r.counts().notes == 5
    conn = db.connect(path)
    try:
        plan = " ".join(str(row) for row in conn.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "COVERING INDEX notes_stat" in plan
        assert conn.execute("SELECT max(rowid) FROM notes").fetchone()[0] == rowid_before
    finally:
        conn.close()


def test_a_fresh_index_waits_its_turn_for_wal_while_another_connection_reads_it(tmp_path):
    """SQLite answers `PRAGMA journal_mode = WAL` with "database is locked" at once, without
    its busy handler, while another connection is about to write a file that is not WAL
    yet: what a fresh vault's `index` met when a `status` opened the new index at the same
    moment (CI saw `index` exit 1)."""
    path = tmp_path / "index.db"
    other = db.pick_binding().connect(str(path), isolation_level=None)
    other.execute("CREATE TABLE made_first(x)")  # a file in the default rollback mode
    other.execute("BEGIN IMMEDIATE")  # holds the reserved lock: a write is coming
    outcome: list[object] = []

    def open_it() -> None:
        try:
            conn = db.connect(path)
            outcome.append(conn.execute("PRAGMA journal_mode").fetchone()[0])
            conn.close()
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test checks
            outcome.append(exc)

    opener = threading.Thread(target=open_it)
    opener.start()
    opener.join(1.0)  # an opener that gives up does so at once; one that waits is still here
    assert not [o for o in outcome if isinstance(o, Exception)], outcome
    other.execute("COMMIT")
    opener.join(HANG_SECONDS)
    other.close()
    assert outcome == ["wal"]


def _open_at_once(paths: list[str], barrier, failures) -> None:
    from pathlib import Path

    from vault_brain.index.sqlite import db as sqlite_db

    failed = 0
    for path in paths:
        barrier.wait()
        try:
            sqlite_db.open_database(Path(path)).close()
        except Exception:  # noqa: BLE001 - counted
            failed += 1
    failures.put(failed)


@pytest.mark.slow
def test_processes_that_open_a_fresh_index_at_the_same_moment_all_get_it(tmp_path):
    """Four processes, each round a new index file, all opening it at once (a barrier): a
    stdio server per client window, a watcher, an `index` and a `status` on a new vault."""
    import multiprocessing

    rounds, procs = 150, 4
    paths = [str(tmp_path / f"r{n}" / "index.db") for n in range(rounds)]
    ctx = multiprocessing.get_context("spawn")
    barrier, failures = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_open_at_once, args=(paths, barrier, failures)) for _ in range(procs)
    ]
    for w in workers:
        w.start()
    failed = sum(failures.get(timeout=HANG_SECONDS * 4) for _ in workers)
    for w in workers:
        w.join(HANG_SECONDS)
    assert failed == 0, f"{failed} of {rounds * procs} opens failed"
