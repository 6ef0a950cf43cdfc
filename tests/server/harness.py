"""Real transports for the MCP server tests: a stdio subprocess and uvicorn on a loopback port,
both driven by the `mcp` client. Tests stay plain synchronous functions: the client lives in
an anyio blocking portal (its own event loop thread)."""

from __future__ import annotations

import functools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.config import Settings, load_settings
from vault_brain.server.app import BrainHandle
from vault_brain.server.http import bind_sockets, make_uvicorn

# The first JSON-RPC message of every MCP session, for tests that speak the protocol raw.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
TOKEN = "test-token-0123456789"

# Fast and offline: no embedding model. Search answers from full text and says `degraded`.
# The run's cache folder (tests/conftest.py) reaches servers started with a bare env too.
BASE_ENV = {
    "VAULT_BRAIN_EMBED_PROVIDER": "none",
    **{k: v for k, v in os.environ.items() if k == "XDG_CACHE_HOME"},
}

NOTES = {
    "How-to/Release checklist.md": (
        "---\nid: rel00001\ntitle: Release checklist\nsummary: Steps before tagging a release.\n"
        "tags: [process, release]\n---\n# Release checklist\n\nFreeze the branch, run the "
        "smoke tests, then tag. See [[Deploy guide]].\n"
    ),
    "How-to/Deploy guide.md": (
        "---\nid: dep00001\ntitle: Deploy guide\n---\n# Deploy guide\n\nCanary first, then the "
        "whole fleet. Rollback is one command.\n"
    ),
    "Projects/Alpha.md": (
        "# Alpha\n\nProject Alpha ships the billing switch. Follow the [[Release checklist]].\n"
    ),
    "Inbox.md": "# Inbox\n\nIdeas about a lighthouse keeper and tidal calendars.\n",
}


def write_vault(root: Path) -> Path:
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@dataclass(frozen=True)
class Reply:
    is_error: bool
    data: Any
    text: str


class McpClient:
    """A blocking MCP client session over a real transport."""

    def __init__(self, transport: Any, vault: Path, stderr_path: Path | None = None) -> None:
        self.vault = vault
        self.stderr_path = stderr_path
        self._stack = ExitStack()
        try:
            self.portal = self._stack.enter_context(start_blocking_portal())
            read, write = self._stack.enter_context(
                self.portal.wrap_async_context_manager(transport)
            )
            self.session = self._stack.enter_context(
                self.portal.wrap_async_context_manager(ClientSession(read, write))
            )
            self.initialize_result = self.portal.call(self.session.initialize)
        except BaseException:
            self._stack.close()
            raise

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Reply:
        result = self.portal.call(self.session.call_tool, name, arguments or {})
        text = result.content[0].text
        return Reply(result.is_error, json.loads(text), text)

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        reply = self.call(name, arguments)
        assert not reply.is_error, reply.text
        return reply.data

    def list_tools(self) -> Any:
        return self.portal.call(self.session.list_tools)

    def rpc(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Any ClientSession method (read_resource, get_prompt, ...), called and awaited."""
        return self.portal.call(functools.partial(getattr(self.session, method), *args, **kwargs))

    def wait_indexed(self) -> None:
        """The server catches up in the background; wait until the seeded notes are listed."""

        def listed() -> bool:
            reply = self.call("memory_list", {"limit": 100})
            return not reply.is_error and len(reply.data["notes"]) >= len(NOTES)

        wait_until(listed, "the server indexing the test vault", every=0.05)

    def close(self) -> None:
        self._stack.close()


@dataclass
class RaceCounts:
    """What race_updates saw: updates lost, rounds without exactly one winner, and the
    losers' error codes."""

    rounds: int
    lost: int = 0
    not_one_winner: int = 0
    codes: dict[str, int] = field(default_factory=dict)

    @property
    def other_errors(self) -> int:
        """Refusals that were not CONFLICT (a loser must be told the note changed)."""
        return sum(n for code, n in self.codes.items() if code != "CONFLICT")

    def __str__(self) -> str:
        return (
            f"{self.lost} updates lost, {self.not_one_winner} rounds without exactly one "
            f"winner, {self.other_errors} errors other than CONFLICT ({self.codes}), "
            f"of {self.rounds} rounds"
        )


def race_updates(clients: list[McpClient], vault: Path, rounds: int) -> RaceCounts:
    """Each round, one client reads Inbox.md and every client updates it at once (a
    barrier) naming that version: exactly one must win, and its text must be the note's."""
    counts = RaceCounts(rounds)
    for r in range(rounds):
        version = clients[r % len(clients)].ok("memory_get", {"id": "Inbox.md"})["version"]
        replies = _update_all(clients, version, r)
        assert len(replies) == len(clients), f"round {r}: {len(replies)} replies"
        won = [i for i, reply in replies if not reply.is_error]
        for _, reply in replies:
            if reply.is_error:
                code = reply.data["code"]
                counts.codes[code] = counts.codes.get(code, 0) + 1
        if len(won) != 1:
            counts.not_one_winner += 1
            counts.lost += max(0, len(won) - 1)
            continue
        text = (vault / "Inbox.md").read_text(encoding="utf-8")
        if f"Round {r} written by server {won[0]}." not in text:
            counts.lost += 1
    return counts


def _update_all(clients: list[McpClient], version: str, r: int) -> list[tuple[int, Reply]]:
    barrier = threading.Barrier(len(clients))
    replies: list[tuple[int, Reply]] = []

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
        t.join(HANG_SECONDS)
    return replies


def stdio_client_for(
    vault: Path,
    tmp: Path,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    server: tuple[str, ...] = ("-m", "vault_brain.server"),
) -> McpClient:
    """A client of a stdio server process; `server`: how Python starts it (a script that
    runs it as on another kind of host, e.g. share_host.py)."""
    stderr_path = tmp / f"stderr-{time.monotonic_ns()}.log"
    errlog = open(stderr_path, "w", encoding="utf-8")  # noqa: SIM115 - kept for the process
    params = StdioServerParameters(
        command=sys.executable,
        args=[*server, "--stdio", "--vault", str(vault), *args],
        env={**BASE_ENV, **(env or {})},
    )
    try:
        return McpClient(stdio_client(params, errlog=errlog), vault, stderr_path)
    finally:
        errlog.close()


class RawSession:
    """A stdio server driven by hand, line by line, so every byte on stdout is seen (and
    bytes no client library would send can be sent). A reader thread collects stdout, so
    a request that gets no reply fails the test instead of hanging it."""

    def __init__(self, vault: Path, stderr_path: Path, env: dict[str, str] | None = None):
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vault_brain.server", "--stdio", "--vault", str(vault)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(stderr_path, "w"),  # noqa: SIM115 - the child owns it
            env={"PATH": "/usr/bin:/bin", **BASE_ENV, **(env or {})},
        )
        self.lines: list[bytes] = []
        self._out: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._out.put(line)

    def send(self, message: dict) -> None:
        self.send_raw(json.dumps(message).encode())

    def send_raw(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = HANG_SECONDS) -> dict:
        try:
            line = self._out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout} s") from None
        self.lines.append(line)
        return json.loads(line)

    def request(self, id_: int, method: str, params: dict | None = None) -> dict:
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})
        return self.receive()

    def finish(self) -> bytes:
        """Close stdin (the client hangs up); return whatever else reached stdout."""
        self.proc.stdin.close()
        self.proc.wait(timeout=HANG_SECONDS)
        self._reader.join(HANG_SECONDS)
        rest = []
        while not self._out.empty():
            rest.append(self._out.get())
        return b"".join(rest)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")


@dataclass
class HttpServer:
    url: str
    vault: Path
    settings: Settings
    stop: Callable[[], None]


def start_http_server(vault: Path, env: dict[str, str] | None = None) -> HttpServer:
    settings = load_settings(vault=str(vault), env={**BASE_ENV, **(env or {})})
    handle = BrainHandle(settings)
    server = make_uvicorn(settings, handle, port=0)
    sockets = bind_sockets(settings.server.host, 0)  # as run_http does, on a free port
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": sockets}, name="uvicorn-test", daemon=True
    )
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), "uvicorn starting")
    assert server.started, "uvicorn stopped before it started"
    # The index opens in the background ("starting" until then): tests begin once it has
    # opened, or failed to, whatever they run first.
    wait_until(lambda: handle.peek() is not None or handle.failed, "the index opening")
    host, port = server.servers[0].sockets[0].getsockname()[:2]

    def stop() -> None:
        server.should_exit = True
        thread.join(HANG_SECONDS)

    return HttpServer(f"http://{url_host(host)}:{port}", vault, settings, stop)


def url_host(host: str) -> str:
    """An address as it appears in a URL and a Host header: IPv6 in brackets."""
    return f"[{host}]" if ":" in host else host


def http_client_for(server: HttpServer, token: str | None = TOKEN) -> McpClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=HANG_SECONDS)
    return McpClient(streamable_http_client(server.url + "/mcp", http_client=http), server.vault)


def files_under(root: Path) -> set[str]:
    """Every file below root, vault-relative, leaving out the index folder."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".vault-brain" not in p.relative_to(root).parts
    }
