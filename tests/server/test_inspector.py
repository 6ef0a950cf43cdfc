"""A third-party client: the MCP Inspector CLI lists and calls the tools over both transports.

Runs wherever npx is installed (each run takes ~2 s warm; the first one fetches the Inspector
from the npm registry). Skipped when npx is absent, when the registry cannot be reached, or
with VAULT_BRAIN_INSPECTOR=0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .harness import BASE_ENV, TOKEN, start_http_server, write_vault

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
NPX = shutil.which("npx")

pytestmark = [
    pytest.mark.slow,  # Node.js start-ups: the slow tail
    pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed"),
    pytest.mark.skipif(
        os.environ.get("VAULT_BRAIN_INSPECTOR") == "0", reason="VAULT_BRAIN_INSPECTOR=0"
    ),
]


@pytest.fixture(scope="module", autouse=True)
def inspector_installed() -> None:
    """Fetch the Inspector once; no registry here is a reason to skip, not a failure."""
    try:
        fetched = subprocess.run(
            [NPX, "-y", "--package", INSPECTOR, "--", "node", "--version"],
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("fetching the MCP Inspector from the npm registry timed out")
    if fetched.returncode != 0:
        pytest.skip(f"the MCP Inspector could not be fetched: {fetched.stderr[-300:]}")


def inspector(*args: str) -> dict:
    result = subprocess.run(
        [NPX, "-y", INSPECTOR, "--cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def stdio_target(vault) -> list[str]:
    env = [a for k, v in BASE_ENV.items() for a in ("-e", f"{k}={v}")]
    return [
        *env,
        "--",
        sys.executable,
        "-m",
        "vault_brain.server",
        "--stdio",
        "--vault",
        str(vault),
    ]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    server = start_http_server(
        write_vault(tmp_path_factory.mktemp("inspector-http")), {"VAULT_BRAIN_TOKEN": TOKEN}
    )
    yield server.url + "/mcp"
    server.stop()


def http_target(url: str) -> list[str]:
    return [
        "--transport",
        "http",
        "--server-url",
        url,
        "--header",
        f"Authorization: Bearer {TOKEN}",
    ]


def test_inspector_lists_six_tools_over_stdio(tmp_path):
    listed = inspector("--method", "tools/list", *stdio_target(write_vault(tmp_path)))
    assert len(listed["tools"]) == 6


def test_inspector_saves_a_note_over_stdio(tmp_path):
    vault = write_vault(tmp_path)
    reply = inspector(
        "--method", "tools/call", "--tool-name", "memory_save",
        "--tool-arg", "title=From Inspector", "content=hello from node",
        *stdio_target(vault),
    )  # fmt: skip
    assert reply["isError"] is False
    assert (vault / json.loads(reply["content"][0]["text"])["path"]).is_file()


def test_inspector_lists_six_tools_over_http(http_url):
    assert len(inspector("--method", "tools/list", *http_target(http_url))["tools"]) == 6


def test_inspector_searches_over_http(http_url):
    reply = inspector(
        "--method", "tools/call", "--tool-name", "memory_search",
        "--tool-arg", "query=release", "limit=2", *http_target(http_url),
    )  # fmt: skip
    assert reply["isError"] is False
    assert json.loads(reply["content"][0]["text"])["results"]
