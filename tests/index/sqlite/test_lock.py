"""One indexer per vault, for the SQLite backend: an flock beside the index file. The first
to take it indexes; a dead holder frees it at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from vault_brain.config import load_settings
from vault_brain.errors import Unavailable
from vault_brain.index.factory import open_index
from vault_brain.index.records import Holder
from vault_brain.index.sqlite.lock import IndexerLock


def settings_for(vault: Path, **index: str):
    return load_settings(vault=str(vault), env={}, overrides={"index": index})


def indexer_lock_path(settings) -> Path:
    """Where the index the settings name keeps its lock (opening it makes the file)."""
    index = open_index(settings)
    try:
        return Path(index.indexer_lock.where)
    finally:
        index.close()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from vault_brain.index.sqlite.lock import IndexerLock
    lock = IndexerLock(Path(sys.argv[1]))
    assert lock.try_acquire(sys.argv[2] if len(sys.argv) > 2 else None)
    print("held", flush=True)
    time.sleep(600)
    """
)


def start_holder(path: Path, *role: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), *role],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_lives_beside_the_index_in_the_vaults_cache_folder_by_default(tmp_path):
    settings = settings_for(tmp_path)
    assert indexer_lock_path(settings) == settings.default_index_path.parent / "indexer.lock"
    assert tmp_path.resolve() not in indexer_lock_path(settings).parents


def test_lock_follows_an_index_kept_outside_the_vault(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    settings = settings_for(vault, path=str(tmp_path / "elsewhere" / "index.db"))
    assert indexer_lock_path(settings) == (tmp_path / "elsewhere" / "indexer.lock").resolve()


def test_first_taker_holds_the_lock_and_a_second_is_refused(tmp_path):
    path = tmp_path / ".vault-brain" / "indexer.lock"
    first, second = IndexerLock(path), IndexerLock(path)
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.held and not second.held
    first.release()


def test_taking_a_held_lock_again_is_a_no_op(tmp_path):
    lock = IndexerLock(tmp_path / "indexer.lock")
    assert lock.try_acquire()
    assert lock.try_acquire()
    lock.release()
    assert not lock.held


def test_released_lock_is_free_for_the_next_process(tmp_path):
    path = tmp_path / "indexer.lock"
    first, second = IndexerLock(path), IndexerLock(path)
    first.try_acquire()
    first.release()
    assert second.try_acquire()
    second.release()


def test_lock_taken_in_one_thread_is_released_from_another(tmp_path):
    path = tmp_path / "indexer.lock"
    lock = IndexerLock(path)
    taker = threading.Thread(target=lock.try_acquire)
    taker.start()
    taker.join()
    assert lock.held
    lock.release()
    assert IndexerLock(path).try_acquire()


def test_lock_held_by_another_process_is_refused(tmp_path):
    path = tmp_path / "indexer.lock"
    holder = start_holder(path)
    try:
        assert not IndexerLock(path).try_acquire()
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_a_killed_holder_is_taken_over_at_once(tmp_path):
    path = tmp_path / "indexer.lock"
    holder = start_holder(path)
    holder.kill()  # SIGKILL: no cleanup code runs, the kernel drops the flock
    holder.wait()
    lock = IndexerLock(path)
    # The kernel drops a process's locks as it exits, before wait() can return: at once.
    assert lock.try_acquire(), "lock not freed after its holder was killed"
    lock.release()


def test_the_lock_is_not_taken_without_a_lock_file(tmp_path):
    assert not IndexerLock(tmp_path / "indexer.lock").taken()


def test_the_lock_is_seen_taken_by_a_holder_in_another_process(tmp_path):
    path = tmp_path / "indexer.lock"
    holder = start_holder(path)
    try:
        assert IndexerLock(path).taken()
    finally:
        holder.kill()
        holder.wait()
    assert not IndexerLock(path).taken()


def test_the_taken_probe_does_not_keep_the_lock(tmp_path):
    path = tmp_path / "indexer.lock"
    with IndexerLock(path) as earlier:
        earlier.try_acquire()  # leaves the lock file behind after release
    assert not IndexerLock(path).taken()
    lock = IndexerLock(path)
    assert lock.try_acquire()
    lock.release()


def test_a_holder_in_this_process_sees_the_lock_taken(tmp_path):
    lock = IndexerLock(tmp_path / "indexer.lock")
    assert lock.try_acquire()
    assert lock.taken() and IndexerLock(lock.path).taken()
    lock.release()
    assert not lock.taken()


def test_lock_that_cannot_be_created_raises_unavailable(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(Unavailable):
        IndexerLock(blocker / "indexer.lock").try_acquire()


def test_the_holder_says_who_it_is_and_what_for(tmp_path):
    path = indexer_lock_path(settings_for(tmp_path))
    reader = IndexerLock(path)  # another process's view of the same lock
    holder = start_holder(path, "index")
    try:
        assert reader.holder() == Holder(holder.pid, "index")
        assert not reader.holder().keeps_in_step  # an index run ends; a watcher stays
    finally:
        holder.kill()
        holder.wait()
    assert reader.holder() is None  # its record, left by a kill -9, is not read
    watcher = IndexerLock(path)
    assert watcher.try_acquire("watch")
    assert reader.holder() == Holder(os.getpid(), "watch")
    assert reader.holder().keeps_in_step
    watcher.release()
    assert not path.with_name("indexer.lock.json").exists()


@pytest.mark.skipif(os.name != "posix", reason="the probe is a shared flock on POSIX only")
def test_another_process_probing_the_lock_is_not_taken_for_its_holder(tmp_path):
    """`taken()` takes the lock for an instant to see whether anyone holds it. Two probes
    at once (a `status` polling while a resident starts) must not see each other as the
    indexer: a CLI test's resident read a prober as a watcher and left (CI, 1 run)."""
    import fcntl

    path = tmp_path / "indexer.lock"
    lock = IndexerLock(path)
    assert lock.try_acquire("index")
    lock.release()
    other = os.open(path, os.O_RDWR)  # another process in the middle of its probe
    try:
        fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        assert not lock.taken() and lock.holder() is None
    finally:
        os.close(other)


def test_an_index_run_waits_for_a_holder_that_has_not_said_who_it_is_yet(vault, make_brain):
    """A process that has just taken the lock writes its record a moment later: an `index`
    that read no record then took it for a watcher and gave up (exit 1) instead of waiting
    for what is most often a search's catch-up pass."""
    from vault_brain.index.sqlite.lock import _FileLock

    vault.write("a.md", "# A\n\nalpaca\n")
    brain = make_brain()
    taker = _FileLock(brain.indexer.lock.where)  # the lock without its record, as mid-take
    assert taker.acquire()
    outcome: list[object] = []

    def index_run() -> None:
        try:
            with brain.index_run():
                outcome.append("ran")
        except Unavailable as exc:
            outcome.append(exc)

    runner = threading.Thread(target=index_run)
    runner.start()
    runner.join(1.0)  # a run that refuses does so at once; one that waits is still here
    assert outcome == [], outcome
    taker.release()
    runner.join(60)
    assert outcome == ["ran"]
