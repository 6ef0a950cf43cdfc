"""Fixtures: one served vault per transport and test module (see harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import (
    TOKEN,
    HttpServer,
    McpClient,
    http_client_for,
    start_http_server,
    stdio_client_for,
    write_vault,
)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    vault = write_vault(tmp_path_factory.mktemp("http-vault"))
    server = start_http_server(vault, {"VAULT_BRAIN_TOKEN": TOKEN})
    client = http_client_for(server)
    client.wait_indexed()
    client.close()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["stdio", "http"])
def mcp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[McpClient]:
    """One served vault per transport and test module; tests share it (each writes its own
    notes) so the suite stays fast."""
    tmp = tmp_path_factory.mktemp(f"{request.param}-served")
    vault = write_vault(tmp / "vault")
    if request.param == "stdio":
        client = stdio_client_for(vault, tmp)
        client.wait_indexed()
        yield client
        client.close()
    else:
        server = start_http_server(vault, {"VAULT_BRAIN_TOKEN": TOKEN})
        client = http_client_for(server)
        client.wait_indexed()
        yield client
        client.close()
        server.stop()
