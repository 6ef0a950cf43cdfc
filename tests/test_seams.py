"""The seams of issue 9, each defect found there reproduced: bounded readers that never wait
for the writer, one vector snapshot per search, vectors of a saved note within seconds,
backlinks as one indexed lookup, one rule for who writes the index, and parse workers
that a script without a __main__ guard can use. They run on every index backend; what
only the SQLite backend does (its WAL, its in-memory vectors) is tested in
tests/index/sqlite/."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from watch_proc import WatchProcess

from tests.conftest import every_backend, shared_path
from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.config import load_settings
from vault_brain.indexer import IDLE_RETRY_SECONDS
from vault_brain.service import Brain

REPO = Path(__file__).resolve().parents[1]

backend = every_backend()


@pytest.fixture
def settings_for(index_settings):
    """Settings for a vault on the backend under test."""

    def make(vault: Path, **sections: dict):
        sections.setdefault("embed", {"provider": "none"})
        sections["index"] = {**index_settings(), **sections.get("index", {})}
        return load_settings(vault=str(vault), env={}, overrides=sections)

    return make


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fill(vault: Path, count: int, words: str = "shared okapi words") -> None:
    for n in range(count):
        folder = vault / f"Folder {n % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Note {n}.md").write_text(
            f"# Note {n}\n\n{words} number {n}.\n\n" + "filler text " * 80, encoding="utf-8"
        )


# --- 1, 2: readers ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to count fds")
def test_ten_thousand_searches_from_changing_threads_keep_connections_bounded(vault, settings_for):
    fill(vault.root, 30)
    with Brain(settings_for(vault.root)) as brain:
        brain.sync()
        brain.search("okapi", mode="fts")
        before = open_fds()
        errors: list[BaseException] = []

        def burst() -> None:
            try:
                for _ in range(20):
                    assert brain.search("okapi number", mode="fts").hits
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        for _ in range(50):  # 50 bursts of 10 fresh threads x 20 searches = 10,000
            threads = [threading.Thread(target=burst) for _ in range(10)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        assert open_fds() - before <= 12  # a few more pooled connections at most, not 500


def test_a_search_on_a_fresh_thread_never_waits_for_a_long_sync(vault, settings_for):
    """A running sync holds the index's write lock, here for as long as the test likes: a
    search from a thread that never read before answers while it is still held."""
    fill(vault.root, 30)
    with Brain(settings_for(vault.root)) as brain:
        (vault.root / "First.md").write_text("# First\n\nokapi\n", encoding="utf-8")
        brain.sync_paths(["First.md"])
        writing, searched, released = threading.Event(), threading.Event(), threading.Event()

        def hold_the_write_lock(progress) -> None:  # called by the pass, between its writes
            if writing.is_set():
                return
            with brain.index.transaction():
                writing.set()
                searched.wait(HANG_SECONDS)
            released.set()

        syncing = threading.Thread(target=brain.sync, kwargs={"progress": hold_the_write_lock})
        syncing.start()
        answers: list[tuple[list[str], bool]] = []
        try:
            assert writing.wait(HANG_SECONDS), "the sync never wrote"

            def search() -> None:
                hits = brain.search("okapi", mode="fts").hits
                answers.append(([h.path for h in hits], released.is_set()))

            fresh = threading.Thread(target=search)  # a thread that never read before
            fresh.start()
            fresh.join(HANG_SECONDS)
        finally:
            searched.set()
            syncing.join()
        assert answers == [(["First.md"], False)]  # answered, while the writer held its lock


# --- 3: one vector snapshot per search ---------------------------------------------------------


@pytest.mark.slow
def test_vector_searches_during_constant_vector_writes_never_fail(vault, settings_for):
    model = str(shared_path("models", "minilm-static-256"))
    fill(vault.root, 40, words="glaze kiln pottery firing")
    settings = settings_for(vault.root, embed={"provider": "local", "model": model})
    with Brain(settings) as brain:
        brain.sync()
        brain.embed_pending()
        stop = threading.Event()
        errors: list[BaseException] = []
        searches = 0

        def search() -> None:
            nonlocal searches
            while not stop.is_set():
                try:
                    brain.search("firing pottery in a kiln", mode="vector")
                    searches += 1
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

        readers = [threading.Thread(target=search) for _ in range(3)]
        for t in readers:
            t.start()
        deadline = time.monotonic() + HANG_SECONDS
        try:
            round_ = 0
            # Every round changes the vector table (a new epoch): 60 rounds at least, and on
            # until the readers have searched 60 times meanwhile, however threads are run.
            while round_ < 60 or searches <= 60:
                assert time.monotonic() < deadline, f"{searches} searches in {round_} rounds"
                path = vault.root / f"Folder {round_ % 10}" / f"Note {round_ % 40}.md"
                path.write_text(f"# Note\n\nglaze round {round_}\n", encoding="utf-8")
                brain.sync_paths([path.relative_to(vault.root).as_posix()])
                brain.embed_pending()
                round_ += 1
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert errors == []
        assert searches > 60


# --- 5: vectors of a saved note --------------------------------------------------------------


def test_a_saved_note_wakes_the_worker_for_its_vectors(vault, settings_for):
    model = str(shared_path("models", "minilm-static-256"))
    (vault.root / "Old.md").write_text("# Old\n\nsomething else entirely\n", encoding="utf-8")
    settings = settings_for(
        vault.root, embed={"provider": "local", "model": model, "strong": "none"}
    )
    with Brain(settings) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        saved = brain.save("Kiln log", "Bisque firing at cone 04, then the glaze firing.")
        # The idle worker would look again IDLE_RETRY_SECONDS after its last round, which
        # ended before the save: vectors sooner than that came because the save woke it.
        wait_until(
            lambda: not brain.status().pending_vectors,
            "the saved note's vectors, before the worker's idle wake-up",
            timeout=IDLE_RETRY_SECONDS / 2,
        )
        hits = brain.search("bisque firing cone", mode="vector", min_score=0.0).hits
        assert hits[0].id == saved.id


# --- 6: backlinks -------------------------------------------------------------------------


@pytest.mark.slow
def test_backlinks_of_a_note_with_a_thousand_linkers_are_one_lookup(vault, settings_for):
    """Every backlink in one answer (how a store finds them, one indexed statement in
    SQLite's case, is tested with its backend: tests/index/sqlite/test_store.py)."""
    (vault.root / "Hub.md").write_text("# Hub\n\nthe centre\n", encoding="utf-8")
    for n in range(1000):
        (vault.root / f"Spoke {n}.md").write_text(f"# Spoke {n}\n\nsee [[Hub]]\n", "utf-8")
    with Brain(settings_for(vault.root)) as brain:
        brain.sync()
        backlinks = brain.get("Hub.md").backlinks
    assert sorted(b.path for b in backlinks) == sorted(f"Spoke {n}.md" for n in range(1000))


def test_links_follow_renames_new_shorter_paths_and_aliases(vault, settings_for):
    (vault.root / "Deep/Er").mkdir(parents=True)
    (vault.root / "Deep/Er/Target.md").write_text("# Target\n", encoding="utf-8")
    (vault.root / "Source.md").write_text("[[Target]] and [[Nick]]\n", encoding="utf-8")
    with Brain(settings_for(vault.root)) as brain:
        brain.sync()
        links = {r.title: r.path for r in brain.get("Source.md").links_out}
        assert links == {"Target": "Deep/Er/Target.md", "Nick": None}
        # A shorter path with the same name wins, as in Obsidian.
        (vault.root / "Target.md").write_text("# Top target\n", encoding="utf-8")
        brain.sync_paths(["Target.md"])
        assert brain.get("Source.md").links_out[0].path == "Target.md"
        assert [b.path for b in brain.get("Target.md").backlinks] == ["Source.md"]
        assert brain.get("Deep/Er/Target.md").backlinks == []
        # An alias added elsewhere resolves the dangling link; removing the note frees it.
        (vault.root / "Other.md").write_text("---\naliases: [Nick]\n---\n# Other\n", "utf-8")
        brain.sync_paths(["Other.md"])
        assert brain.get("Source.md").links_out[1].path == "Other.md"
        (vault.root / "Other.md").unlink()
        (vault.root / "Target.md").unlink()
        brain.sync()
        links = {r.title: r.path for r in brain.get("Source.md").links_out}
        assert links == {"Target": "Deep/Er/Target.md", "Nick": None}


# --- 7: who writes the index ----------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full_env.update({"VAULT_BRAIN_EMBED_PROVIDER": "none", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def test_index_defers_to_a_running_watcher_and_full_refuses(vault):
    fill(vault.root, 5)
    watcher = WatchProcess(vault.root)
    try:
        watcher.wait_for("watch_reconcile")
        plain = run_cli("index", "--vault", str(vault.root))
        assert plain.returncode == 0, plain.stderr
        assert "keeps this index in step" in plain.stdout
        full = run_cli("index", "--full", "--vault", str(vault.root))
        assert full.returncode == 1
        assert "another vault-brain process" in full.stderr
    finally:
        watcher.close()
    after = run_cli("index", "--full", "--vault", str(vault.root))
    assert after.returncode == 0, after.stderr


def test_a_save_in_a_reader_process_is_findable_at_once(vault, settings_for, index_settings):
    fill(vault.root, 3)
    watcher = WatchProcess(vault.root, index_url=index_settings().get("url"))
    try:
        watcher.wait_for("watch_reconcile")
        with Brain(settings_for(vault.root)) as reader:
            assert not reader.status().indexer and reader.status().watched
            saved = reader.save("Quokka census", "Seven quokkas on the ridge.")
            hits = reader.search("quokkas ridge", mode="fts").hits
            assert hits and hits[0].id == saved.id
    finally:
        watcher.close()


# --- workers --------------------------------------------------------------------------------

SCRIPT_WITHOUT_GUARD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    vault, marker = Path(sys.argv[1]), Path(sys.argv[2])
    with marker.open("a") as fh:
        fh.write("ran\\n")
    settings = load_settings(vault=str(vault), env={}, overrides={"embed": {"provider": "none"}})
    with Brain(settings) as brain:
        report = brain.sync()
    print(report.added)
    """
)


@pytest.mark.slow
def test_a_script_without_a_main_guard_can_sync_a_big_vault(vault, tmp_path):
    fill(vault.root, 450)  # more than PARALLEL_MIN: worker processes parse
    script = tmp_path / "no_guard.py"
    script.write_text(SCRIPT_WITHOUT_GUARD, encoding="utf-8")
    marker = tmp_path / "ran.txt"
    done = subprocess.run(
        [sys.executable, str(script), str(vault.root), str(marker)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "450"
    assert marker.read_text().splitlines() == ["ran"]  # no worker ran the script again


CHATTY_SITECUSTOMIZE = textwrap.dedent(
    """
    import threading

    def chatter():
        while True:
            print("a library says hello on stdout", flush=True)
            threading.Event().wait(0.01)

    threading.Thread(target=chatter, daemon=True).start()  # in every process started
    """
)


@pytest.mark.slow
def test_a_library_printing_on_stdout_in_a_parse_worker_corrupts_nothing(vault, tmp_path):
    fill(vault.root, 450)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CHATTY_SITECUSTOMIZE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "vault_brain", "index", "--vault", str(vault.root), "--json"],
        env={**os.environ, "VAULT_BRAIN_EMBED_PROVIDER": "none", "PYTHONPATH": f"{site}:{REPO}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "parse_workers_failed" not in done.stderr  # the workers did the parsing
    assert "a library says hello" in done.stderr  # ... and their chatter went to stderr
    assert '"added": 450' in done.stdout


def test_stray_bytes_on_a_worker_pipe_are_a_worker_error_not_a_crash():
    import io
    import pickle

    from vault_brain.index import workers

    stray = io.BytesIO(b"hello world, not a length-prefixed pickle at all")
    with pytest.raises(pickle.UnpicklingError):
        workers._receive(stray)


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _workers_of(parent: int) -> set[int]:
    """The live parse workers that `parent` started (other suites on the machine have theirs)."""
    found = set()
    for entry in os.listdir("/proc"):
        stat = _stat(entry) if entry.isdigit() else None  # once: it may exit between reads
        if stat is None or stat[1] != parent:
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"vault_brain.index.workers" in cmdline:
            found.add(int(entry))
    return found


def _running(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")  # a zombie has exited


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find processes")
def test_parse_workers_exit_when_their_indexer_is_killed_during_start_up(vault, tmp_path):
    fill(vault.root, 450)
    settings = load_settings(vault=str(vault.root))  # where the CLI keeps this vault's index
    # Killed as soon as its first worker process exists, and a moment later (while they
    # start up, then while they parse): whatever the machine's speed, workers were started.
    for delay in (0.0, 0.1, 0.3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "vault_brain", "index", "--vault", str(vault.root)],
            env={**os.environ, "VAULT_BRAIN_EMBED_PROVIDER": "none"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        pid = proc.pid
        wait_until(lambda: _workers_of(pid), "the indexer starting its workers", every=0.005)  # noqa: B023
        time.sleep(delay)  # not a wait for anything: where in the start-up the kill lands
        started = _workers_of(pid)
        proc.kill()  # SIGKILL to the indexer alone: its workers must notice by themselves
        proc.wait()
        wait_until(lambda: not any(map(_running, started)), f"{started} exiting")  # noqa: B023
        for index in settings.index_path.parent.glob("index.db*"):
            index.unlink()
