"""The warm resident end to end: a CLI `search` that searched in-process leaves a real
background process for the vault (vault_brain/resident.py), which answers the next CLI
searches on the warm socket, stays as fresh as a one-shot search, gives the socket up to a
watcher and exits when idle, when the vault goes or on SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import index_of, run, small_vault  # noqa: F401 - the fixture
from tests.waiting import HANG_SECONDS, wait_until
from tests.watch_proc import WatchProcess

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "AF_UNIX") or not Path("/proc/self/fd").is_dir(),
    reason="no unix sockets, or no /proc to see the resident's process in",
)

# The suite turns residents off (tests/conftest.py); these tests turn them back on.
WARM = {"VAULT_BRAIN_EMBED_PROVIDER": "none", "VAULT_BRAIN_SEARCH_KEEP_WARM": "300"}


def _search(vault: Path, query: str = "deploy the pipeline", env: dict | None = None, *extra):
    r = run("search", query, "--vault", str(vault), "--json", *extra, env=env or WARM)
    assert r.returncode == 0, r.stderr
    return r


def _status(vault: Path, env: dict | None = None) -> dict:
    r = run("status", "--vault", str(vault), "--json", env=env or WARM)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that does not reap."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _residents(vault: Path) -> list[int]:
    """The live `vault-brain resident` processes for this vault."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"resident" in args and os.fsencode(str(vault)) in args and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _events(log: Path, name: str) -> list[dict]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [r for r in records if r.get("event") == name]


@pytest.fixture
def warm_vault(small_vault):  # noqa: F811 - the fixture from tests/test_cli.py
    """An indexed vault, its resident log, and every resident of it ended at the end."""
    assert run("index", "--vault", str(small_vault.root), env=WARM).returncode == 0
    log = index_of(small_vault.root).parent / "resident.log"
    yield small_vault, log
    for pid in _residents(small_vault.root):
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not _residents(small_vault.root), "the residents ended")


def _resident_up(vault: Path) -> dict:
    return wait_until(lambda: _status(vault)["resident"], "a resident answering")


def test_the_second_search_is_answered_by_the_resident_with_the_same_bytes(warm_vault):
    vault, log = warm_vault
    first = _search(vault.root)  # in-process: nothing runs for the vault yet
    assert json.loads(first.stdout)["results"][0]["path"] == "How-to/Deploy.md"
    resident = _resident_up(vault.root)
    assert resident["kind"] == "resident" and resident["keep_warm"] == 300
    assert resident["answered"] == 0 and _residents(vault.root) == [resident["pid"]]
    second = _search(vault.root)
    assert second.stdout == first.stdout  # byte for byte what the in-process search printed
    after = _status(vault.root)["resident"]
    assert after["pid"] == resident["pid"] and after["answered"] == 1
    assert [e["kind"] for e in _events(log, "warm_search")] == ["resident"]
    lines = run("status", "--vault", str(vault.root), env=WARM).stdout
    assert f"a resident (pid {resident['pid']}" in lines and "idle for 300 s" in lines


def test_an_edit_after_the_resident_started_is_found_by_the_next_search(warm_vault):
    vault, _ = warm_vault
    _search(vault.root)
    resident = _resident_up(vault.root)
    vault.write("New.md", "# Fresh\n\nAn okapi appeared at the deploy.\n")
    found = json.loads(_search(vault.root, "okapi").stdout)
    assert found["results"][0]["path"] == "New.md"
    (vault.root / "New.md").unlink()
    gone = json.loads(_search(vault.root, "okapi").stdout)
    assert all(r["path"] != "New.md" for r in gone["results"])
    assert _status(vault.root)["resident"]["answered"] == resident["answered"] + 2


def test_the_resident_leaves_no_indexer_role_between_searches(warm_vault):
    vault, _ = warm_vault
    _search(vault.root)
    _resident_up(vault.root)
    _search(vault.root)
    st = _status(vault.root)
    assert st["resident"]["answered"] == 1
    assert st["indexer_pid"] is None and st["watched"] is False


def test_the_resident_exits_when_idle(warm_vault):
    vault, log = warm_vault
    _search(vault.root, env={**WARM, "VAULT_BRAIN_SEARCH_KEEP_WARM": "1"})
    started = wait_until(lambda: _events(log, "resident_started"), "the resident started")
    assert started[0]["keep_warm"] == 1
    pid = started[0]["pid"]
    wait_until(lambda: not _alive(pid), "the idle resident gone")
    assert [e["reason"] for e in _events(log, "resident_exit")] == ["idle"]
    assert _status(vault.root)["resident"] is None


def test_the_resident_exits_when_its_vault_folder_is_removed(warm_vault):
    vault, log = warm_vault
    _search(vault.root)
    pid = _resident_up(vault.root)["pid"]
    shutil.rmtree(vault.root)
    wait_until(lambda: not _alive(pid), "the resident of a removed vault gone")
    assert [e["reason"] for e in _events(log, "resident_exit")] == ["vault_gone"]


def test_the_resident_exits_on_sigterm_and_takes_its_socket_along(warm_vault):
    vault, log = warm_vault
    _search(vault.root)
    pid = _resident_up(vault.root)["pid"]
    sock = Path(_events(log, "resident_started")[0]["path"])
    assert sock.exists()
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not _alive(pid), "the resident gone after SIGTERM")
    assert [e["reason"] for e in _events(log, "resident_exit")] == ["SIGTERM"]
    assert not sock.exists()


def test_a_watch_started_while_a_resident_answers_takes_the_socket(warm_vault):
    vault, log = warm_vault
    _search(vault.root)
    pid = _resident_up(vault.root)["pid"]
    watcher = WatchProcess(vault.root)
    try:
        watcher.wait_for("warm_resident_left", pid=pid)
        event = watcher.wait_for("warm_socket")
        assert event["kind"] == "watcher"
        wait_until(lambda: not _alive(pid), "the resident gone")
        assert [e["reason"] for e in _events(log, "resident_exit")] == ["asked"]
        r = _search(vault.root)
        assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
        watcher.wait_for("warm_search", kind="watcher")
        assert _status(vault.root)["resident"] is None  # the watcher answers, not a resident
        assert _residents(vault.root) == []  # and the search it answered left none
    finally:
        watcher.close()


def test_no_resident_is_started_beside_a_watcher_with_other_settings(warm_vault):
    vault, log = warm_vault
    watcher = WatchProcess(vault.root)
    try:
        watcher.wait_for("warm_socket")
        other = _search(vault.root, env={**WARM, "VAULT_BRAIN_SEARCH_LIMIT": "1"})
        assert len(json.loads(other.stdout)["results"]) == 1  # in-process: other settings
        assert watcher.count("warm_search") == 0
        # A search returns once a resident it starts has been exec'd: none was.
        assert _residents(vault.root) == [] and not log.exists()
    finally:
        watcher.close()


def test_two_searches_racing_leave_one_resident(warm_vault):
    vault, log = warm_vault
    args = [sys.executable, "-m", "vault_brain", "search", "deploy", "--vault", str(vault.root)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    racing = [
        subprocess.Popen(
            args,
            env={**env, **WARM},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    assert [p.wait(HANG_SECONDS) for p in racing] == [0, 0, 0]
    # Every resident they started runs by now (a search returns once its child exec'd);
    # the ones that lost the socket leave.
    wait_until(lambda: len(_residents(vault.root)) <= 1, "the losing residents gone")
    (pid,) = _residents(vault.root)
    assert _resident_up(vault.root)["pid"] == pid
    assert [e["pid"] for e in _events(log, "resident_started")] == [pid]


def test_a_captured_search_returns_while_its_resident_runs_on_detached(warm_vault):
    vault, log = warm_vault
    # run() captures stdout and stderr and gives up after 120 s: a resident (300 s) holding
    # either pipe would hold the call until it exited.
    _search(vault.root)
    pid = _resident_up(vault.root)["pid"]
    assert _alive(pid) and os.getsid(pid) == pid  # a session of its own
    fds = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            fds[int(fd.name)] = os.readlink(fd)
        except OSError:
            pass  # closed meanwhile
    assert fds[0] == fds[1] == os.devnull
    assert fds[2] == str(log)
    assert not [target for target in fds.values() if target.startswith("pipe:")]


def test_keep_warm_0_starts_no_resident(warm_vault):
    vault, log = warm_vault
    off = {**WARM, "VAULT_BRAIN_SEARCH_KEEP_WARM": "0"}
    _search(vault.root, env=off)
    # A search returns once a resident it starts has been exec'd: none is there now.
    assert _residents(vault.root) == [] and not log.exists()
    assert _status(vault.root, env=off)["resident"] is None


def test_a_search_with_other_settings_replaces_the_resident(warm_vault):
    vault, log = warm_vault
    _search(vault.root)
    old = _resident_up(vault.root)["pid"]
    other = {**WARM, "VAULT_BRAIN_SEARCH_LIMIT": "1"}  # the config changed, say
    one = _search(vault.root, env=other)  # not answered by the resident: in-process
    assert len(json.loads(one.stdout)["results"]) == 1
    wait_until(lambda: not _alive(old), "the resident for the old settings gone")
    new = wait_until(lambda: _status(vault.root, other)["resident"], "a resident for the new")
    assert new["pid"] != old and new["answered"] == 0
    again = _search(vault.root, env=other)
    assert again.stdout == one.stdout
    assert _status(vault.root, other)["resident"]["answered"] == 1
    assert [e["reason"] for e in _events(log, "resident_exit")] == ["asked"]


@pytest.mark.slow
def test_on_the_default_settings_the_resident_answers_hybrid_with_the_same_bytes(small_vault):  # noqa: F811
    """With the instant and e5 tiers on (a default `index`): the resident's answer, raw
    scores and each arm's evidence included, is what the in-process search printed."""
    on = {"VAULT_BRAIN_SEARCH_KEEP_WARM": "300"}
    assert run("index", "--vault", str(small_vault.root), env=on).returncode == 0
    try:
        first = _search(small_vault.root, "steeping tea temperature", on, "--explain")
        assert json.loads(first.stdout)["results"][0]["path"] == "Notes/Tea.md"
        wait_until(lambda: _status(small_vault.root, on)["resident"], "a resident")
        wait_until(lambda: _status(small_vault.root, on)["resident"]["ready"], "its models")
        second = _search(small_vault.root, "steeping tea temperature", on, "--explain")
        assert second.stdout == first.stdout
        assert _status(small_vault.root, on)["resident"]["answered"] == 1
    finally:
        for pid in _residents(small_vault.root):
            os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not _residents(small_vault.root), "the resident ended")
