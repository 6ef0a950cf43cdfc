"""Live sync: a real watchdog observer over real temp vaults keeps a real index in step."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from watch_proc import WatchProcess
from watch_storm import Storm

from tests.settle import batches, settle
from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.config import load_settings
from vault_brain.errors import Unavailable
from vault_brain.indexer import Indexer
from vault_brain.service import Brain
from vault_brain.watch import Watcher

STORM_OPS = int(os.environ.get("VAULT_BRAIN_STORM_OPS", "500"))
POLL_INTERVAL = 0.1


def make_settings(vault: Path, *, poll: bool = False, debounce_ms: int = 50, index: str = ""):
    return load_settings(
        vault=str(vault),
        env={},
        overrides={
            "embed": {"provider": "none"},
            "index": {"path": index},
            "watch": {
                "poll": poll,
                "debounce_ms": debounce_ms,
                "poll_interval_seconds": POLL_INTERVAL,
            },
        },
    )


def write(vault: Path, rel: str, text: str) -> Path:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def fresh_snapshot(vault: Path, tmp_path: Path) -> dict:
    """What a full reindex of the vault as it is now builds, in a separate index."""
    index = tmp_path / f"fresh-{time.monotonic_ns()}" / "index.db"
    with Brain(make_settings(vault, index=str(index))) as fresh:
        fresh.sync(full=True)
        return fresh.snapshot()


def fts_paths(brain: Brain, query: str) -> list[str]:
    return sorted(hit.path for hit in brain.search(query, mode="fts", limit=50).hits)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write(root, "Inbox.md", "# Inbox\nthings to file\n")
    write(root, "Projects/Alpha.md", "---\nid: alpha001\n---\n# Alpha\nlaunch plan\n")
    return root


@pytest.fixture
def running(vault: Path):
    """A Brain whose Indexer took the vault's lock and watches it; stopped afterwards."""
    settings = make_settings(vault)
    brain = Brain(settings)
    watcher = brain.indexer
    watcher.health_check_seconds = 0.5
    watcher.start()
    assert watcher.wait_idle(HANG_SECONDS)
    yield watcher, brain
    watcher.stop()
    brain.close()


# --- single operations ---------------------------------------------------------------------


def test_start_takes_the_indexer_role_and_reconciles_the_vault(running):
    watcher, brain = running
    assert watcher.role == "indexer"
    assert brain.status().indexer
    assert watcher.stats().reconciles == 1
    assert brain.status().notes == 2


def test_new_note_becomes_findable(running, vault):
    watcher, brain = running
    write(vault, "Daily/2026-01-02.md", "# Standup\nquokka sighting\n")
    settle(brain)
    assert fts_paths(brain, "quokka") == ["Daily/2026-01-02.md"]


def test_edit_replaces_the_old_text(running, vault):
    watcher, brain = running
    write(vault, "Inbox.md", "# Inbox\nwombat\n")
    settle(brain)
    assert fts_paths(brain, "wombat") == ["Inbox.md"]
    assert fts_paths(brain, "things") == []


def test_atomic_save_syncs_only_the_final_path_once(running, vault):
    watcher, brain = running
    temp = write(vault, "Projects/Alpha.md.tmp4242", "---\nid: alpha001\n---\n# Alpha\nnarwhal\n")
    os.replace(temp, vault / "Projects/Alpha.md")
    settle(brain)
    assert batches(watcher) == [("Projects/Alpha.md",)]
    assert fts_paths(brain, "narwhal") == ["Projects/Alpha.md"]


def test_create_then_modify_is_one_sync(vault):
    """Events less than the debounce apart are one sync. The debounce here is far wider
    than a loaded machine may pause this thread between the two writes (with the 50 ms of
    the other tests, a 0.1 s pause made two syncs)."""
    with Brain(make_settings(vault, debounce_ms=2000)) as brain, brain.indexer as watcher:
        assert watcher.wait_idle(HANG_SECONDS)
        with (vault / "Burst.md").open("w", encoding="utf-8") as fh:
            fh.write("# Burst\n")
            fh.flush()
            fh.write("axolotl\n")
        settle(brain)
        assert batches(watcher) == [("Burst.md",)]
        assert fts_paths(brain, "axolotl") == ["Burst.md"]


def test_moved_note_keeps_its_frontmatter_id(running, vault):
    watcher, brain = running
    (vault / "Archive").mkdir()
    os.rename(vault / "Projects/Alpha.md", vault / "Archive/Alpha.md")
    settle(brain)
    assert brain.get("alpha001").path == "Archive/Alpha.md"
    assert fts_paths(brain, "launch") == ["Archive/Alpha.md"]


def test_folder_rename_moves_every_note_under_it(running, vault):
    watcher, brain = running
    write(vault, "Projects/Deep/Beta.md", "# Beta\nlaunch day\n")
    settle(brain)
    os.rename(vault / "Projects", vault / "Work")
    settle(brain)
    assert fts_paths(brain, "launch") == ["Work/Alpha.md", "Work/Deep/Beta.md"]


def test_hidden_names_renamed_to_visible_ones_are_indexed_and_back_removed(running, vault):
    """Events whose every path is hidden are dropped at once; a rename out of hiding is not."""
    watcher, brain = running
    write(vault, ".drafts/Gamma.md", "# Gamma\nokapi season\n")
    write(vault, "Projects/.Delta.md", "# Delta\nokapi trail\n")
    settle(brain)
    assert fts_paths(brain, "okapi") == []
    os.rename(vault / ".drafts", vault / "Drafts")
    os.rename(vault / "Projects/.Delta.md", vault / "Projects/Delta.md")
    settle(brain)
    assert fts_paths(brain, "okapi") == ["Drafts/Gamma.md", "Projects/Delta.md"]
    os.rename(vault / "Drafts", vault / ".drafts")
    settle(brain)
    assert fts_paths(brain, "okapi") == ["Projects/Delta.md"]


def test_folder_delete_removes_its_notes(running, vault):
    watcher, brain = running
    (vault / "Projects/Alpha.md").unlink()
    (vault / "Projects").rmdir()
    settle(brain)
    assert fts_paths(brain, "launch") == []
    assert brain.status().notes == 1


def test_folder_moved_in_from_outside_is_indexed(running, vault, tmp_path):
    watcher, brain = running
    outside = tmp_path / "outside"
    write(outside, "Imported/Gamma.md", "# Gamma\npangolin\n")
    os.rename(outside / "Imported", vault / "Imported")
    settle(brain)
    assert fts_paths(brain, "pangolin") == ["Imported/Gamma.md"]


def test_note_moved_out_of_the_vault_is_removed(running, vault, tmp_path):
    watcher, brain = running
    (tmp_path / "outside").mkdir()
    os.rename(vault / "Inbox.md", tmp_path / "outside" / "Inbox.md")
    settle(brain)
    assert fts_paths(brain, "things") == []


def test_files_in_ignored_folders_and_other_kinds_are_not_synced(running, vault):
    watcher, brain = running
    for rel in (".obsidian/ws.md", ".trash/Old.md", ".git/x.md", "Projects/.hidden/h.md"):
        write(vault, rel, "# Hidden\nmarmoset\n")
    write(vault, "Projects/picture.png", "marmoset")
    write(vault, "notes.txt", "marmoset")
    settle(brain)
    assert batches(watcher) == []
    assert fts_paths(brain, "marmoset") == []


def test_index_folder_activity_does_not_wake_the_watcher(running, vault):
    watcher, brain = running
    for n in range(5):
        write(vault, f".vault-brain/scratch{n}.md", "x")
    brain.sync()  # writes the index database inside .vault-brain
    settle(brain)
    assert batches(watcher) == []  # no batch but the settle marker's


def test_an_index_folder_in_plain_sight_in_the_vault_does_not_wake_the_watcher(vault):
    """The folder the index writes its files in (Index.folder) is left alone wherever it
    lies in the vault, not only under the hidden .vault-brain."""
    settings = make_settings(vault, index=str(vault / "Index" / "index.db"))
    with Brain(settings) as brain, brain.indexer as watcher:
        assert watcher.wait_idle(HANG_SECONDS)
        before = batches(watcher)
        for n in range(5):
            write(vault, f"Index/scratch{n}.md", "x")
        brain.sync()  # writes the index database in Index/
        settle(brain)  # every event so far handled: the marker's own batches are left out
        assert batches(watcher) == before


def test_touch_without_change_keeps_the_index_as_it_was(running, vault, tmp_path):
    watcher, brain = running
    before = brain.snapshot()
    # A new mtime a microsecond on, in the same second: sort_time (whole seconds) follows a
    # touch as a rebuild would, so a plain touch failed whenever a second ticked meanwhile.
    st = (vault / "Inbox.md").stat()
    os.utime(vault / "Inbox.md", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    settle(brain)
    assert any("Inbox.md" in b for b in batches(watcher))  # the event was seen, the file read
    assert brain.snapshot() == before


def test_idle_watcher_does_no_work(running):
    """Idle, the sync worker sleeps on its condition: it wakes for its health checks (every
    0.5 s here) and for nothing else, and syncs nothing."""
    watcher, _ = running
    before = watcher.stats()
    wait_until(
        lambda: watcher.stats().health_checks >= before.health_checks + 3, "three health checks"
    )
    after = watcher.stats()
    work = ("batches", "paths_synced", "reconciles", "errors", "pending")
    assert [getattr(after, k) for k in work] == [getattr(before, k) for k in work]
    checks = after.health_checks - before.health_checks
    assert after.wakeups - before.wakeups <= checks + 1  # a spinning worker wakes thousands


# --- start, stop, failures -----------------------------------------------------------------


def test_changes_made_while_stopped_are_found_on_start(vault):
    settings = make_settings(vault)
    with Brain(settings) as brain:
        brain.sync()
        write(vault, "Later.md", "# Later\nokapi\n")
        (vault / "Inbox.md").unlink()
        with brain.indexer as watcher:
            assert watcher.wait_idle(HANG_SECONDS)
            assert fts_paths(brain, "okapi") == ["Later.md"]
            assert fts_paths(brain, "things") == []


def test_stop_syncs_paths_still_waiting_for_their_debounce(vault):
    settings = make_settings(vault, debounce_ms=5000)
    with Brain(settings) as brain:
        watcher = brain.indexer
        watcher.start()
        assert watcher.wait_idle(HANG_SECONDS)
        write(vault, "Late.md", "# Late\ncapybara\n")
        wait_until(lambda: watcher.stats().pending, "Late.md waiting for its debounce")
        watcher.stop()
        assert fts_paths(brain, "capybara") == ["Late.md"]
        assert watcher.role == "stopped"


def test_stop_releases_the_indexer_lock(vault):
    settings = make_settings(vault)
    with Brain(settings) as brain:
        watcher = brain.indexer
        watcher.start()
        watcher.stop()
        assert watcher.lock.try_acquire()
        watcher.lock.release()


def test_inotify_overflow_warning_triggers_a_full_reconcile(running):
    watcher, brain = running
    before = watcher.stats().reconciles
    # watchdog reports a kernel queue overflow only through this logger
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    settle(brain)
    assert watcher.stats().reconciles == before + 1


def test_dead_observer_is_restarted_and_the_vault_reconciled(running, vault):
    watcher, brain = running
    watcher.watcher._observer.stop()  # what a crashed emitter thread looks like from outside
    write(vault, "Missed.md", "# Missed\nbinturong\n")  # no observer sees this write
    wait_until(lambda: watcher.stats().reconciles >= 2, "the observer restarted and reconciled")
    settle(brain)
    assert fts_paths(brain, "binturong") == ["Missed.md"]
    write(vault, "After.md", "# After\nbinturong again\n")
    settle(brain)
    assert fts_paths(brain, "binturong") == ["After.md", "Missed.md"]


class FailingOnce:
    """The real Indexer behind a first sync_paths that fails, as a vanished disk would."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.failed = False

    def sync(self):
        return self.indexer.sync()

    def sync_paths(self, paths):
        if not self.failed:
            self.failed = True
            raise Unavailable("disk went away")
        return self.indexer.sync_paths(paths)


def test_failed_sync_loses_no_change_and_is_retried(vault):
    settings = make_settings(vault)
    with Brain(settings) as brain:
        target = FailingOnce(brain.indexer)
        with Watcher(target, settings) as watcher:
            assert watcher.wait_idle(HANG_SECONDS)
            write(vault, "Retry.md", "# Retry\ntapir\n")
            # The batch fails, and the full reconcile that follows (after a back-off) syncs it.
            wait_until(lambda: watcher.stats().reconciles >= 2, "the reconcile after the failure")
            assert watcher.wait_idle(HANG_SECONDS)
        assert target.failed
        assert watcher.stats().errors == 1
        assert fts_paths(brain, "tapir") == ["Retry.md"]


# --- roles ---------------------------------------------------------------------------------


def test_second_watcher_on_the_vault_only_reads(vault, tmp_path):
    settings = make_settings(vault)
    with Brain(settings) as first, Brain(settings) as second:
        with first.indexer as indexer, second.indexer as reader:
            assert indexer.role == "indexer"
            assert reader.role == "reader"
            assert not second.status().indexer
            write(vault, "Shared.md", "# Shared\ngecko\n")
            settle(first)
            assert fts_paths(second, "gecko") == ["Shared.md"]
            assert reader.stats() is None  # a reader runs no watcher


def test_reader_takes_over_when_the_indexer_stops(vault):
    settings = make_settings(vault)
    with Brain(settings) as first, Brain(settings) as second:
        indexer = first.indexer
        reader = second.indexer
        reader.lock_retry_seconds = 0.1
        indexer.start()
        reader.start()
        assert reader.role == "reader"
        indexer.stop()
        wait_until(lambda: reader.role == "indexer", "the reader taking over")
        assert second.status().indexer
        write(vault, "Handover.md", "# Handover\nmeerkat\n")
        settle(second)
        assert fts_paths(second, "meerkat") == ["Handover.md"]
        reader.stop()


# --- the storm -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("poll", [False, True], ids=["native", "poll"])
def test_storm_settles_to_what_a_full_reindex_builds(tmp_path, poll):
    vault = tmp_path / "vault"
    vault.mkdir()
    storm = Storm(vault, seed=20260101 + poll)
    storm.run(40)  # something to start from
    settings = make_settings(vault, poll=poll)
    with Brain(settings) as brain, brain.indexer as watcher:
        assert watcher.wait_idle(HANG_SECONDS)
        done = storm.run(STORM_OPS)
        settle(brain)
        assert sum(done.values()) >= STORM_OPS * 0.9
        assert watcher.stats().batches > 0
        got = brain.snapshot()
    want = fresh_snapshot(vault, tmp_path)
    assert len(want["notes"]) > 20
    for table in ("notes", "chunks", "links", "tags"):
        assert got[table] == want[table], table


# --- separate processes: crash, hand-over, signals, permissions ----------------------------


def many_notes(vault: Path, count: int) -> None:
    storm = Storm(vault, seed=count)
    for n in range(count):
        write(vault, f"Bulk {n % 12}/Note {n}.md", storm.text(f"Note {n}"))


def reader_brain(vault: Path) -> Brain:
    return Brain(make_settings(vault))


@pytest.mark.slow
def test_kill_9_mid_reconcile_then_restart_equals_a_full_reindex(tmp_path):
    vault = tmp_path / "vault"
    many_notes(vault, 1000)
    first = WatchProcess(vault)
    try:
        first.wait_for("watch_started")
        with reader_brain(vault) as reader:
            wait_until(lambda: reader.status().notes, "the reconcile's first commit", every=0.005)
            first.pause()  # SIGSTOP at once: the reconcile stands where it is (5 batches)
            assert 0 < reader.status().notes < 1000, "the reconcile finished before the stop"
            first.kill()
            assert first.count("watch_reconcile") == 0
    finally:
        first.close()
    (vault / "Bulk 3/Note 3.md").unlink()  # and the vault moves on while nobody watches
    write(vault, "After crash.md", "# After crash\n")
    second = WatchProcess(vault)
    try:
        second.wait_for("watch_reconcile")
        assert second.terminate() == 0
    finally:
        second.close()
    with reader_brain(vault) as reader:
        got = reader.snapshot()
    assert got == fresh_snapshot(vault, tmp_path)


def test_sigterm_stops_the_watcher_cleanly_and_frees_the_lock(vault):
    proc = WatchProcess(vault)
    try:
        proc.wait_for("watch_reconcile")
        assert proc.terminate() == 0
        proc.close()
        assert proc.count("watch_stopped") == 1
        assert proc.other == []
        settings = make_settings(vault)
        with Brain(settings) as brain, brain.indexer as watcher:
            assert watcher.role == "indexer"
    finally:
        proc.close()


def test_two_processes_one_indexes_and_the_other_takes_over_when_it_is_killed(vault):
    settings = make_settings(vault)
    other = WatchProcess(vault)
    try:
        other.wait_for("watch_started", role="indexer")
        with Brain(settings) as brain:
            watcher = brain.indexer  # default retry: takes over "within seconds"
            watcher.start()
            failures: list[BaseException] = []
            searches = 0
            stop = threading.Event()

            def search_all_the_time() -> None:
                nonlocal searches
                while not stop.is_set():
                    try:
                        brain.search("launch plan handover", mode="fts")
                        searches += 1
                    except BaseException as exc:  # noqa: BLE001 - any failure fails the test
                        failures.append(exc)

            searcher = threading.Thread(target=search_all_the_time)
            searcher.start()
            try:
                assert watcher.role == "reader"
                write(vault, "By other.md", "# By other\nheron\n")
                wait_until(
                    lambda: fts_paths(brain, "heron") == ["By other.md"], "the other's note found"
                )
                assert watcher.stats() is None  # the other process does the indexing
                other.kill()
                wait_until(lambda: watcher.role == "indexer", "this process taking over")
                write(vault, "By me.md", "# By me\nheron again\n")
                wait_until(
                    lambda: fts_paths(brain, "heron") == ["By me.md", "By other.md"],
                    "this process's note found",
                )
                wait_until(lambda: searches > 10, "searches all along")
            finally:
                stop.set()
                searcher.join()
                watcher.stop()
            assert failures == []
            assert searches > 10
    finally:
        other.close()


def without_file_permission_override() -> list[str]:
    """root reads every folder; drop that power for the watcher process, or skip."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a folder unreadable")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


def test_folder_turning_unreadable_loses_nothing_already_indexed(vault):
    prefix = without_file_permission_override()
    write(vault, "Secret/Plan.md", "# Plan\nsecret ocelot\n")
    write(vault, "Secret/Deep/More.md", "# More\nsecret ocelot\n")
    secret = vault / "Secret"
    proc = WatchProcess(vault, prefix=prefix)
    try:
        proc.wait_for("watch_reconcile")
        with reader_brain(vault) as reader:
            assert fts_paths(reader, "ocelot") == ["Secret/Deep/More.md", "Secret/Plan.md"]
            secret.chmod(0)
            write(vault, "Open.md", "# Open\nocelot in the open\n")
            # The folder's own attribute event came before Open.md's, so it is handled too.
            wait_until(lambda: "Open.md" in fts_paths(reader, "ocelot"), "Open.md indexed")
            assert proc.terminate() == 0
            proc.close()
            restarted = WatchProcess(vault, prefix=prefix)  # a full reconcile while unreadable
            try:
                restarted.wait_for("watch_reconcile")
                assert restarted.terminate() == 0
            finally:
                restarted.close()
            assert fts_paths(reader, "ocelot") == [
                "Open.md",
                "Secret/Deep/More.md",
                "Secret/Plan.md",
            ]
    finally:
        secret.chmod(0o755)
        proc.close()
