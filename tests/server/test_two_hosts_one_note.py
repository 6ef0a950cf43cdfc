"""Two MCP servers on two hosts, one Postgres and one shared vault folder whose file locks do
not hold between the hosts (a network share without working locks): the index's per-note
lock (a Postgres advisory lock) alone serialises their writes to one note.

The two hosts are two stdio server processes, each run as on a host that mounts the vault
from a network share (share_host.py: no exchange of two names in one step), on a vault
where no file lock can be taken at all: `<vault>/.vault-brain/locks` is a file, so the
vault's flock (vault/locks.py) falls back to "this process only", as it does on a file
system without flock. Each server says so in its log, which the test checks, so the two
really have nothing but the index in common.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import McpClient, race_updates, stdio_client_for, write_vault

# Many rounds of two servers: the slow tail.
pytestmark = pytest.mark.slow

SHARE_HOST = str(Path(__file__).with_name("share_host.py"))
# VB_RACE_SCALE=2 runs twice the rounds.
ROUNDS = round(500 * float(os.environ.get("VB_RACE_SCALE", "1")))


@pytest.fixture
def backend() -> str:
    """Only a server index can be shared by hosts."""
    return "postgres"


@pytest.fixture
def two_hosts(tmp_path: Path, index_settings) -> Iterator[tuple[Path, list[McpClient]]]:
    """A vault without file locks and two servers on it with one Postgres index."""
    vault = write_vault(tmp_path / "vault")
    (vault / ".vault-brain").mkdir()
    (vault / ".vault-brain" / "locks").write_text("not a folder: no file lock can be taken\n")
    env = {"VAULT_BRAIN_INDEX_URL": index_settings()["url"]}
    clients: list[McpClient] = []
    try:
        for _ in range(2):
            clients.append(stdio_client_for(vault, tmp_path, env=env, server=(SHARE_HOST,)))
        for client in clients:
            client.wait_indexed()
        yield vault, clients
    finally:
        for client in clients:
            client.close()


def test_two_hosts_updating_one_version_have_exactly_one_winner_each_round(two_hosts):
    vault, clients = two_hosts
    counts = race_updates(clients, vault, ROUNDS)
    for client in clients:
        assert "note_lock_unavailable" in client.stderr_path.read_text(), (
            "a server took a file lock: the two hosts were not lock-less"
        )
    figures = f"two hosts, one Postgres, no shared file lock: {counts}"
    print("\n" + figures)
    assert (counts.lost, counts.not_one_winner, counts.other_errors) == (0, 0, 0), figures


def test_a_save_through_one_host_is_found_through_the_other(two_hosts):
    _, clients = two_hosts
    for n in range(4):
        word = f"numbat{n}quince"
        saved = clients[n % 2].ok(
            "memory_save", {"title": f"Sighting {n}", "content": f"A {word} was seen."}
        )
        other = clients[(n + 1) % 2]
        found = other.ok("memory_search", {"query": word})
        assert [h["id"] for h in found["results"]][:1] == [saved["id"]], found
        got = other.ok("memory_get", {"id": saved["id"]})
        assert word in got["content"]
