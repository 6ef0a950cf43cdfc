"""HTTP specifics: bearer auth, /health, the body cap, and the refusal of an unsafe bind."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpx
import pytest

from tests.waiting import HANG_SECONDS
from vault_brain.config import load_settings
from vault_brain.errors import ConfigError
from vault_brain.server.http import check_bind, is_loopback

from .harness import INITIALIZE, TOKEN, http_client_for, start_http_server, write_vault

ACCEPT = {"Accept": "application/json, text/event-stream"}


def post_mcp(server, token: str | None, **kwargs) -> httpx.Response:
    headers = dict(ACCEPT)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(kwargs.pop("headers", {}))
    return httpx.post(server.url + "/mcp", headers=headers, timeout=HANG_SECONDS, **kwargs)


def test_mcp_without_token_is_401_with_www_authenticate(http_server):
    response = post_mcp(http_server, None, json=INITIALIZE)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_mcp_with_a_wrong_token_is_401(http_server):
    assert post_mcp(http_server, "wrong-token", json=INITIALIZE).status_code == 401


def test_mcp_with_a_basic_auth_header_is_401(http_server):
    response = post_mcp(http_server, None, json=INITIALIZE, headers={"Authorization": TOKEN})
    assert response.status_code == 401


def test_mcp_with_the_token_is_200(http_server):
    assert post_mcp(http_server, TOKEN, json=INITIALIZE).status_code == 200


def test_a_tool_call_is_answered_with_one_json_body(http_server):
    """No SSE stream per call (the tools send nothing but their result): a client gets
    application/json, which every Streamable HTTP client must accept, and the server
    skips an event stream's tasks and framing on every call."""
    opened = post_mcp(http_server, TOKEN, json=INITIALIZE)
    assert opened.headers["content-type"].startswith("application/json")
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post_mcp(http_server, TOKEN, json=ready, headers=session).status_code == 202
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "memory_search", "arguments": {"query": "alpha"}},
    }
    reply = post_mcp(http_server, TOKEN, json=call, headers=session)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    assert body["id"] == 2 and body["result"]["isError"] is False


def test_health_answers_without_a_token(http_server):
    response = httpx.get(http_server.url + "/health", timeout=HANG_SECONDS)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "status",
        "reason",
        "notes",
        "chunks",
        "pending_vectors",
        "pending_summaries",
        "embedding",
        "dimension",
        "summary_model",
        "indexer",
        "last_error",
        "indexing",
        "strong",
    }
    assert body["status"] == "ok" and body["notes"] >= 4


def test_health_does_not_reveal_the_vault_path(http_server):
    assert (
        str(http_server.vault)
        not in httpx.get(http_server.url + "/health", timeout=HANG_SECONDS).text
    )


def test_body_over_the_cap_is_413(http_server):
    big = b"{" + b" " * (http_server.settings.server.max_body_bytes + 1) + b"}"
    response = post_mcp(
        http_server, TOKEN, content=big, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413


def test_streamed_body_over_the_cap_is_413(http_server):
    # Chunked upload: no Content-Length to check, so the bytes are counted as they arrive.
    chunk = b" " * 65536
    count = http_server.settings.server.max_body_bytes // len(chunk) + 2
    response = post_mcp(
        http_server,
        TOKEN,
        content=(chunk for _ in range(count)),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413


def test_unauthenticated_big_body_is_401_not_413(http_server):
    big = b" " * (http_server.settings.server.max_body_bytes + 1)
    assert post_mcp(http_server, None, content=big).status_code == 401


def test_mcp_client_with_the_token_lists_the_tools(http_server):
    client = http_client_for(http_server)
    try:
        assert len(client.list_tools().tools) == 6
    finally:
        client.close()


def test_server_without_a_token_on_loopback_needs_no_auth(tmp_path):
    server = start_http_server(write_vault(tmp_path))
    try:
        client = http_client_for(server, token=None)
        try:
            assert not client.call("memory_list", {"limit": 1}).is_error
        finally:
            client.close()
    finally:
        server.stop()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_hosts_are_recognised(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.org"])
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback(host)


def test_non_loopback_bind_without_token_is_a_config_error(tmp_path):
    settings = load_settings(vault=str(tmp_path), env={"VAULT_BRAIN_SERVER_HOST": "0.0.0.0"})
    with pytest.raises(ConfigError, match="token"):
        check_bind(settings)


def test_non_loopback_bind_with_token_is_allowed(tmp_path):
    env = {"VAULT_BRAIN_SERVER_HOST": "0.0.0.0", "VAULT_BRAIN_TOKEN": TOKEN}
    check_bind(load_settings(vault=str(tmp_path), env=env))


def test_non_loopback_bind_without_token_refuses_to_start_with_exit_2(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "vault_brain.server", "--http", "--host", "0.0.0.0",
         "--vault", str(tmp_path)],
        capture_output=True, text=True, timeout=HANG_SECONDS, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 2
    assert "token" in result.stderr and result.stdout == ""


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory):
    """A server whose index cannot be opened (its folder cannot exist)."""
    vault = write_vault(tmp_path_factory.mktemp("broken"))
    server = start_http_server(vault, {"VAULT_BRAIN_INDEX_PATH": "/dev/null/index.db"})
    yield server
    server.stop()


def test_index_that_cannot_open_answers_unavailable_and_retryable(broken_server):
    client = http_client_for(broken_server, token=None)
    try:
        reply = client.call("memory_get", {"id": "rel00001"})
    finally:
        client.close()
    assert reply.is_error and reply.data["code"] == "UNAVAILABLE"
    assert reply.data["retryable"] is True


def test_health_is_503_when_the_index_cannot_open(broken_server):
    response = httpx.get(broken_server.url + "/health", timeout=HANG_SECONDS)
    assert response.status_code == 503 and response.json()["status"] == "error"


def test_read_only_vault_lists_three_tools_and_refuses_writes(tmp_path):
    vault = write_vault(tmp_path / "vault")
    server = start_http_server(vault, {"VAULT_BRAIN_WRITE_READ_ONLY": "true"})
    client = http_client_for(server, token=None)
    try:
        names = [t.name for t in client.list_tools().tools]
        reply = client.call("memory_save", {"title": "No", "content": "nope"})
    finally:
        client.close()
        server.stop()
    assert names == ["memory_search", "memory_list", "memory_get"]
    assert reply.is_error and reply.data["code"] == "FORBIDDEN"
    assert not (vault / "No.md").exists()


@pytest.mark.parametrize(
    "command",
    [["-m", "vault_brain.server", "--http"], ["-m", "vault_brain", "serve", "--http"]],
    ids=["module", "cli"],
)
def test_a_port_in_use_exits_1_saying_so_before_anything_starts(tmp_path, command):
    vault = write_vault(tmp_path / "vault")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, *command, "--port", str(port), "--vault", str(vault)],
            capture_output=True, text=True, timeout=HANG_SECONDS,
            env={"PATH": "/usr/bin:/bin", "VAULT_BRAIN_EMBED_PROVIDER": "none"},
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"127.0.0.1:{port}" in result.stderr and "in use" in result.stderr
    assert "Traceback" not in result.stderr
    # Nothing started: no index was opened, no indexer lock taken.
    assert not (vault / ".vault-brain").exists()
