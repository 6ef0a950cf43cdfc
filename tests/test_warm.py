"""The warm path end to end: a CLI `search` asks the real `watch` or `serve` process running
for the vault over its local socket, and searches in-process when nobody answers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_cli import run, small_vault  # noqa: F401 - the fixture
from tests.waiting import HANG_SECONDS, wait_until
from tests.watch_proc import WatchProcess

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no unix sockets")

FTS = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}  # what tests/watch_proc.py runs the watcher with


def _socket_path(vault: Path) -> Path:
    """Where the warm socket belongs: beside the vault's index file (in the user's cache)."""
    from vault_brain.config import load_settings

    return load_settings(vault=str(vault)).index_path.parent / "search.sock"


def _search(vault, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run("search", "deploy the pipeline", "--vault", str(vault), *extra, env=env or FTS)


@pytest.fixture
def watched(small_vault):  # noqa: F811 - the fixture from tests/test_cli.py
    assert run("index", "--vault", str(small_vault.root), env=FTS).returncode == 0
    expected = _search(small_vault.root, "--json")  # in-process: nobody else runs
    assert expected.returncode == 0, expected.stderr
    watcher = WatchProcess(small_vault.root)
    try:
        event = watcher.wait_for("warm_socket")
        yield small_vault, watcher, event["path"], expected.stdout
    finally:
        watcher.close()


def test_cli_search_is_answered_by_the_running_watcher(watched):
    vault, watcher, path, in_process = watched
    assert path == str(_socket_path(vault.root))
    r = _search(vault.root, "--json")
    assert r.returncode == 0, r.stderr
    watcher.wait_for("warm_search")
    assert json.loads(r.stdout) == json.loads(in_process)
    assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
    lines = _search(vault.root)  # the lines a person reads, from the same answer
    assert lines.returncode == 0 and "How-to/Deploy.md" in lines.stdout
    watcher.wait_for("warm_search", after=1)


def test_a_cli_with_other_settings_searches_itself(watched):
    vault, watcher, _, _ = watched
    r = _search(vault.root, "--json", env={**FTS, "VAULT_BRAIN_SEARCH_LIMIT": "1"})
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["results"]) == 1
    assert watcher.count("warm_search") == 0


def test_a_refused_search_is_a_usage_error_either_way(watched):
    vault, watcher, _, _ = watched
    warm = _search(vault.root, "--since", "last tuesday-ish")
    watcher.close()
    cold = _search(vault.root, "--since", "last tuesday-ish")
    assert warm.returncode == cold.returncode == 2
    assert warm.stderr == cold.stderr and "INVALID_INPUT" in warm.stderr


def test_the_socket_goes_with_the_watcher(watched):
    vault, watcher, path, _ = watched
    assert os.stat(path).st_mode & 0o777 == 0o600  # the user's alone
    assert watcher.terminate() == 0
    assert not os.path.exists(path)
    r = _search(vault.root, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["results"], r.stderr


def test_a_dead_socket_is_passed_over_and_then_replaced(small_vault):  # noqa: F811
    assert run("index", "--vault", str(small_vault.root), env=FTS).returncode == 0
    path = _socket_path(small_vault.root)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # what a killed watcher leaves: a socket file nobody answers on
    dead.close()
    r = _search(small_vault.root, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
    watcher = WatchProcess(small_vault.root)
    try:
        assert watcher.wait_for("warm_socket")["path"] == str(path)
        assert _search(small_vault.root, "--json").returncode == 0
        watcher.wait_for("warm_search")
    finally:
        watcher.close()


def test_a_stdio_server_answers_the_cli_too(small_vault):  # noqa: F811
    assert run("index", "--vault", str(small_vault.root), env=FTS).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "vault_brain", "serve", "--stdio", "--vault", str(small_vault.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, **FTS},
    )
    seen: list[str] = []
    try:
        assert server.stderr is not None
        for line in server.stderr:
            seen.append(line)
            if '"warm_socket"' in line:
                break
        assert any('"warm_socket"' in line for line in seen), seen[-5:]
        r = _search(small_vault.root, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
        wait_until(lambda: '"warm_search"' in server.stderr.readline(), "the server's warm_search")
    finally:
        server.terminate()
        server.wait(HANG_SECONDS)


def test_an_index_too_deep_for_a_socket_path_is_answered_from_the_runtime_folder(
    tmp_path, monkeypatch
):
    deep = tmp_path / "vault"
    deep.mkdir(parents=True)
    # The index lives in the user's cache: a cache folder this deep leaves no room for a
    # socket path (108 bytes) beside the index file.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ("a-folder-with-a-long-name-" * 4)))
    (deep / "Deploy.md").write_text("# Deploy to production\n\nRun the pipeline.\n")
    runtime = Path(tempfile.mkdtemp(prefix="vb-run-"))  # short: pytest's tmp_path is long
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # the watcher and the CLI inherit it
    assert run("index", "--vault", str(deep), env=FTS).returncode == 0
    watcher = WatchProcess(deep)
    try:
        path = watcher.wait_for("warm_socket")["path"]
        assert path.startswith(str(runtime / "vault-brain"))
        r = _search(deep, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["results"][0]["path"] == "Deploy.md"
        watcher.wait_for("warm_search")
    finally:
        watcher.close()
        shutil.rmtree(runtime, ignore_errors=True)
