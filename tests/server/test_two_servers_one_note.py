"""Two stdio servers on one vault (a desktop client starts one per window) updating one note
with the same version: exactly one wins, the other gets CONFLICT, no update is lost."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.conftest import every_backend

from .harness import McpClient, stdio_client_for, write_vault

backend = every_backend()
# A race loop of two servers: the slow tail.
pytestmark = pytest.mark.slow

# VB_RACE_SCALE=5 runs five times the rounds (for the figures in a report).
RACE_SCALE = float(os.environ.get("VB_RACE_SCALE", "1"))
ROUNDS = round(100 * RACE_SCALE)


def _update_both(clients: list[McpClient], version: str, r: int) -> list[tuple[int, object]]:
    barrier = threading.Barrier(len(clients))
    replies: list[tuple[int, object]] = []

    def update(i: int) -> None:
        barrier.wait()
        reply = clients[i].call(
            "memory_update",
            {"id": "Inbox.md", "version": version, "content": f"Round {r} written by server {i}."},
        )
        replies.append((i, reply))

    threads = [threading.Thread(target=update, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return replies


@pytest.fixture
def index_env(backend: str, index_settings) -> dict[str, str]:
    """The environment that points a server process at the backend's index."""
    url = index_settings().get("url")
    return {"VAULT_BRAIN_INDEX_URL": url} if url else {}


def test_two_servers_updating_one_version_have_exactly_one_winner(
    tmp_path: Path, index_env: dict[str, str], backend: str
) -> None:
    vault = write_vault(tmp_path / "vault")
    clients = [stdio_client_for(vault, tmp_path, env=index_env) for _ in range(2)]
    lost = not_one_winner = 0
    try:
        for client in clients:
            client.wait_indexed()
        for r in range(ROUNDS):
            version = clients[r % 2].ok("memory_get", {"id": "Inbox.md"})["version"]
            replies = _update_both(clients, version, r)
            assert len(replies) == 2
            won = [i for i, reply in replies if not reply.is_error]
            refused = [i for i, reply in replies if reply.is_error]
            codes = {reply.data["code"] for _, reply in replies if reply.is_error}
            assert codes <= {"CONFLICT"}, codes
            if len(won) != 1 or len(refused) != 1:
                not_one_winner += 1
                lost += max(0, len(won) - 1)
                continue
            text = (vault / "Inbox.md").read_text(encoding="utf-8")
            if f"Round {r} written by server {won[0]}." not in text:
                lost += 1
    finally:
        for client in clients:
            client.close()
    print(
        f"\ntwo stdio servers ({backend}): {lost} updates lost, {not_one_winner} rounds "
        f"without exactly one winner, of {ROUNDS} rounds"
    )
    assert (lost, not_one_winner) == (0, 0)


def test_a_save_through_one_server_is_found_through_the_other_at_once(
    tmp_path: Path, index_env: dict[str, str]
) -> None:
    vault = write_vault(tmp_path / "vault")
    clients = [stdio_client_for(vault, tmp_path, env=index_env) for _ in range(2)]
    try:
        for client in clients:
            client.wait_indexed()
        for n in range(5):
            word = f"quokka{n}zebra"
            saved = clients[n % 2].ok(
                "memory_save", {"title": f"Sighting {n}", "content": f"A {word} was seen."}
            )
            found = clients[(n + 1) % 2].ok("memory_search", {"query": word})
            assert [h["id"] for h in found["results"]][:1] == [saved["id"]], found
    finally:
        for client in clients:
            client.close()
