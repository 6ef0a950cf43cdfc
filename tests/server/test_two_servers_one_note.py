"""Two stdio servers on one vault (a desktop client starts one per window) updating one note
with the same version: exactly one wins, the other gets CONFLICT, no update is lost."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import every_backend

from .harness import race_updates, stdio_client_for, write_vault

backend = every_backend()
# A race loop of two servers: the slow tail.
pytestmark = pytest.mark.slow

# VB_RACE_SCALE=5 runs five times the rounds (for the figures in a report).
RACE_SCALE = float(os.environ.get("VB_RACE_SCALE", "1"))
ROUNDS = round(100 * RACE_SCALE)


@pytest.fixture
def index_env(backend: str, index_settings) -> dict[str, str]:
    """The environment that points a server process at the backend's index."""
    url = index_settings().get("url")
    return {"VAULT_BRAIN_INDEX_URL": url} if url else {}


@contextmanager
def two_servers(vault: Path, tmp_path: Path, env: dict[str, str]) -> Iterator[list]:
    """Two stdio servers on one vault (and one index), both past their first pass."""
    clients = [stdio_client_for(vault, tmp_path, env=env) for _ in range(2)]
    try:
        for client in clients:
            client.wait_indexed()
        yield clients
    finally:
        for client in clients:
            client.close()


def test_two_servers_updating_one_version_have_exactly_one_winner(
    tmp_path: Path, index_env: dict[str, str], backend: str
) -> None:
    vault = write_vault(tmp_path / "vault")
    with two_servers(vault, tmp_path, index_env) as clients:
        counts = race_updates(clients, vault, ROUNDS)
    figures = f"two stdio servers ({backend}): {counts}"
    print("\n" + figures)
    assert (counts.lost, counts.not_one_winner, counts.other_errors) == (0, 0, 0), figures


def test_a_save_through_one_server_is_found_through_the_other_at_once(
    tmp_path: Path, index_env: dict[str, str]
) -> None:
    vault = write_vault(tmp_path / "vault")
    with two_servers(vault, tmp_path, index_env) as clients:
        for n in range(5):
            word = f"quokka{n}zebra"
            saved = clients[n % 2].ok(
                "memory_save", {"title": f"Sighting {n}", "content": f"A {word} was seen."}
            )
            found = clients[(n + 1) % 2].ok("memory_search", {"query": word})
            assert [h["id"] for h in found["results"]][:1] == [saved["id"]], found
