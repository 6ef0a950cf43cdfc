"""DNS rebinding: a web page must not reach a server bound to this machine by pointing its own
host name at a loopback address. Host (and Origin) are checked on every loopback bind, and
`server.allowed_hosts` / `server.allowed_origins` let a reverse proxy or Docker network in."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from tests.waiting import HANG_SECONDS
from vault_brain.config import load_settings
from vault_brain.errors import ConfigError
from vault_brain.server.http import check_bind

from .harness import INITIALIZE, TOKEN, start_http_server, write_vault

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(server, headers: dict[str, str] | None = None, token: str | None = None):
    sent = dict(ACCEPT)
    if token:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    return httpx.post(server.url + "/mcp", json=INITIALIZE, headers=sent, timeout=HANG_SECONDS)


@pytest.fixture(scope="module", params=["127.0.0.1", "127.0.0.2", "::1", "0:0:0:0:0:0:0:1"])
def loopback_server(request, tmp_path_factory):
    vault = write_vault(tmp_path_factory.mktemp("hosts"))
    server = start_http_server(vault, {"VAULT_BRAIN_SERVER_HOST": request.param})
    yield server
    server.stop()


def test_a_foreign_host_header_is_refused_on_every_loopback_bind(loopback_server):
    response = post(loopback_server, {"Host": "attacker.example"})
    assert response.status_code == 421, (loopback_server.url, response.text)


def test_a_foreign_host_with_the_right_port_is_refused(loopback_server):
    port = urlsplit(loopback_server.url).port
    assert post(loopback_server, {"Host": f"attacker.example:{port}"}).status_code == 421


def test_the_refusal_says_which_setting_lets_a_proxy_in(loopback_server):
    body = post(loopback_server, {"Host": "attacker.example"}).json()
    assert body["code"] == "FORBIDDEN" and "server.allowed_hosts" in body["message"]


def test_a_foreign_origin_is_refused_on_every_loopback_bind(loopback_server):
    response = post(loopback_server, {"Origin": "http://attacker.example"})
    assert response.status_code == 403
    assert "server.allowed_origins" in response.json()["message"]


def test_the_address_the_server_was_reached_at_is_accepted(loopback_server):
    assert post(loopback_server).status_code == 200


def test_loopback_names_on_the_servers_port_are_accepted(loopback_server):
    port = urlsplit(loopback_server.url).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert post(loopback_server, {"Host": host}).status_code == 200, host


def test_a_loopback_name_on_another_port_is_refused(loopback_server):
    port = urlsplit(loopback_server.url).port
    assert post(loopback_server, {"Host": f"localhost:{port + 1}"}).status_code == 421


def test_a_page_served_from_this_machine_may_call(loopback_server):
    for origin in ("http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8000"):
        assert post(loopback_server, {"Origin": origin}).status_code == 200, origin


def test_origin_null_is_refused(loopback_server):
    assert post(loopback_server, {"Origin": "null"}).status_code == 403


def test_health_checks_the_host_too(loopback_server):
    response = httpx.get(
        loopback_server.url + "/health", headers={"Host": "attacker.example"}, timeout=HANG_SECONDS
    )
    assert response.status_code == 421


@pytest.fixture(scope="module")
def proxied_server(tmp_path_factory):
    """A loopback server behind a reverse proxy (vault.example.com) and a Docker network."""
    vault = write_vault(tmp_path_factory.mktemp("proxied"))
    env = {
        "VAULT_BRAIN_SERVER_ALLOWED_HOSTS": "vault.example.com, host.docker.internal:*",
        "VAULT_BRAIN_SERVER_ALLOWED_ORIGINS": "https://chat.example.com",
    }
    server = start_http_server(vault, env)
    yield server
    server.stop()


def test_allowed_hosts_let_a_reverse_proxy_in(proxied_server):
    assert post(proxied_server, {"Host": "vault.example.com"}).status_code == 200
    assert post(proxied_server, {"Host": "Vault.Example.com:443"}).status_code == 200


def test_a_name_with_star_port_is_allowed_on_any_port(proxied_server):
    assert post(proxied_server, {"Host": "host.docker.internal:8080"}).status_code == 200


def test_allowed_hosts_add_to_the_loopback_names(proxied_server):
    assert post(proxied_server).status_code == 200
    assert post(proxied_server, {"Host": "attacker.example"}).status_code == 421


def test_allowed_origins_let_a_web_client_in(proxied_server):
    assert post(proxied_server, {"Origin": "https://chat.example.com"}).status_code == 200
    assert post(proxied_server, {"Origin": "https://other.example.com"}).status_code == 403


def test_allowed_hosts_star_turns_the_host_check_off(tmp_path):
    server = start_http_server(write_vault(tmp_path), {"VAULT_BRAIN_SERVER_ALLOWED_HOSTS": "*"})
    try:
        assert post(server, {"Host": "anything.example"}).status_code == 200
    finally:
        server.stop()


def test_a_network_bind_with_a_token_accepts_any_host_by_default(tmp_path):
    # Beyond loopback the bearer token is the guard; the host names people use are unknowable.
    env = {"VAULT_BRAIN_SERVER_HOST": "0.0.0.0", "VAULT_BRAIN_TOKEN": TOKEN}
    server = start_http_server(write_vault(tmp_path), env)
    try:
        response = post(server, {"Host": "mybox.lan:8080"}, token=TOKEN)
        assert response.status_code == 200
    finally:
        server.stop()


def test_a_network_bind_with_allowed_hosts_checks_them(tmp_path):
    env = {
        "VAULT_BRAIN_SERVER_HOST": "0.0.0.0",
        "VAULT_BRAIN_TOKEN": TOKEN,
        "VAULT_BRAIN_SERVER_ALLOWED_HOSTS": "vault.example.com",
    }
    server = start_http_server(write_vault(tmp_path), env)
    try:
        assert post(server, {"Host": "vault.example.com"}, token=TOKEN).status_code == 200
        assert post(server, {"Host": "mybox.lan"}, token=TOKEN).status_code == 421
    finally:
        server.stop()


def test_entries_that_could_never_match_refuse_to_start(tmp_path):
    env = {
        "VAULT_BRAIN_SERVER_ALLOWED_HOSTS": "https://vault.example.com/mcp",
        "VAULT_BRAIN_SERVER_ALLOWED_ORIGINS": "chat.example.com",
    }
    with pytest.raises(ConfigError) as err:
        check_bind(load_settings(vault=str(tmp_path), env=env))
    assert len(err.value.problems) == 2
    assert "server.allowed_hosts" in str(err.value) and "server.allowed_origins" in str(err.value)
