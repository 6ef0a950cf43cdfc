"""`serve --http` as a person meets it: the URL to paste on stderr, and a client without the
right token told so (a Bearer challenge with a description, a JSON-RPC error the mcp client
raises, no OAuth server to chase), with the reason in the server's log and never the token.

The server is the real CLI process; the clients are the mcp client (plain, and with the
SDK's OAuth provider, as Claude Code and other OAuth-capable clients behave) and httpx."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.exceptions import OAuthRegistrationError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from mcp.shared.exceptions import MCPError

from tests.waiting import HANG_SECONDS

from .harness import TOKEN, McpClient, write_vault

URL_LINE = re.compile(r"^vault-brain: serving MCP at (http://\S+/mcp)")


class Served:
    """`python -m vault_brain serve --http` on a free loopback port, its stderr collected."""

    def __init__(self, vault: Path, env: dict[str, str]) -> None:
        self.vault = vault
        self.lines: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        for _ in range(3):  # a free port may be taken between the probe and the bind
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vault_brain", "serve", "--http", "--port", str(port),
                 "--vault", str(vault)],
                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                env={**full_env, "VAULT_BRAIN_EMBED_PROVIDER": "none", **env},
            )  # fmt: skip
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
            self.url = self._wait_for_url()
            if self.url is not None:
                return
        raise AssertionError("serve --http never printed its URL:\n" + "\n".join(self.lines))

    def _read(self) -> None:
        for line in self.proc.stderr:
            self._lines.put(line.rstrip("\n"))

    def _wait_for_url(self) -> str | None:
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    return None
                continue
            self.lines.append(line)
            found = URL_LINE.match(line)
            if found:
                self.lines.append(self._lines.get(timeout=HANG_SECONDS))  # how to pass the token
                return found.group(1)
        return None

    def stop(self) -> str:
        """Stop the server (as Ctrl-C does); everything it wrote on stderr."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=HANG_SECONDS)
        self._reader.join(HANG_SECONDS)  # stderr is at its end: the reader has queued every line
        while not self._lines.empty():
            self.lines.append(self._lines.get())
        return "\n".join(self.lines)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = Served(write_vault(tmp_path_factory.mktemp("auth")), {"VAULT_BRAIN_TOKEN": TOKEN})
    yield server
    if server.proc.poll() is None:
        server.stop()


def plain_client(url: str, vault: Path, token: str | None) -> McpClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=HANG_SECONDS)
    return McpClient(streamable_http_client(url, http_client=http), vault)


def test_the_url_line_is_on_stderr_and_works_with_the_token(served):
    assert served.url.startswith("http://127.0.0.1:")
    client = plain_client(served.url, served.vault, TOKEN)
    try:
        assert len(client.list_tools().tools) == 6
    finally:
        client.close()
    said = "\n".join(served.lines)
    assert "Authorization: Bearer" in said and "claude mcp add --transport http" in said
    assert TOKEN not in said


def test_a_client_without_the_token_is_told_to_send_it(served):
    with pytest.raises(MCPError) as caught:
        plain_client(served.url, served.vault, None)
    message = str(caught.value)
    assert "no bearer token" in message and "Authorization: Bearer <token>" in message
    assert "OAuth" in message  # there is none: the token is the way in


def test_a_client_with_a_wrong_token_is_told_it_is_wrong(served):
    with pytest.raises(MCPError) as caught:
        plain_client(served.url, served.vault, "not-the-token")
    assert "not this server's" in str(caught.value)


def test_the_401_is_a_bearer_challenge_with_a_description(served):
    response = httpx.post(served.url, json={}, timeout=HANG_SECONDS)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert 'error_description="no bearer token was sent' in challenge
    assert "resource_metadata" not in challenge  # nothing points a client at an OAuth server
    assert response.json()["error"]["data"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ],
)
def test_oauth_discovery_finds_nothing_and_says_why(served, path):
    base = served.url.removesuffix("/mcp")
    response = httpx.get(base + path, timeout=HANG_SECONDS)
    assert response.status_code == 404
    assert "does not use OAuth" in response.json()["error_description"]


def test_an_oauth_client_stops_at_registration_with_the_explanation(served):
    """What OAuth-capable clients do on a 401: discover (404 here), then register a client
    (refused with the same explanation, which they print), and never open a browser."""

    class NoStore:
        async def get_tokens(self):
            return None

        async def set_tokens(self, tokens):
            pass

        async def get_client_info(self):
            return None

        async def set_client_info(self, info):
            pass

    opened: list[str] = []

    async def redirect(url: str) -> None:
        opened.append(url)

    async def callback():
        raise AssertionError("no authorization should be attempted")

    provider = OAuthClientProvider(
        served.url,
        OAuthClientMetadata(redirect_uris=["http://127.0.0.1:9/callback"], client_name="test"),
        NoStore(),
        redirect,
        callback,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=HANG_SECONDS)
    with pytest.raises(BaseException) as caught:
        McpClient(streamable_http_client(served.url, http_client=http), served.vault)
    error = caught.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, OAuthRegistrationError)
    assert "does not use OAuth" in str(error) and "Authorization: Bearer" in str(error)
    assert opened == []


def test_the_log_says_why_a_request_was_refused_and_never_the_token(tmp_path):
    server = Served(write_vault(tmp_path / "vault"), {"VAULT_BRAIN_TOKEN": TOKEN})
    try:
        httpx.post(server.url, json={}, timeout=HANG_SECONDS)
        httpx.post(
            server.url, json={}, headers={"Authorization": "Bearer guess-1"}, timeout=HANG_SECONDS
        )
        httpx.post(
            server.url, json={}, headers={"Authorization": f"Basic {TOKEN}"}, timeout=HANG_SECONDS
        )
        httpx.get(server.url.removesuffix("/mcp") + "/.well-known/oauth-authorization-server")
    finally:
        log = server.stop()
    refused = [line for line in log.splitlines() if '"http_unauthorized"' in line]
    assert ['"missing"' in line for line in refused] == [True, False, False]
    assert any('"wrong"' in line for line in refused)
    assert any('"not_bearer"' in line for line in refused)
    assert '"http_oauth_discovery"' in log
    assert TOKEN not in log and "guess-1" not in log


def test_without_a_token_the_line_says_none_is_needed(tmp_path):
    server = Served(write_vault(tmp_path / "vault"), {})
    try:
        said = "\n".join(server.lines)
        assert "no token is set" in said
        plain_client(server.url, server.vault, None).close()
    finally:
        server.stop()
