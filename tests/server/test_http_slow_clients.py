"""Slow clients: a connection that sends its request too slowly (or not at all) is closed, and
more connections than the cap cannot starve /health or the process's file descriptors.
Real sockets against a real uvicorn. No bound on how soon: a cut-off is waited for (up to the
hang deadline), and "past the timeout" means after the server has cut off another
connection for it, on its own clock."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from tests.waiting import HANG_SECONDS, wait_until

from .harness import BASE_ENV, TOKEN, http_client_for, start_http_server, write_vault

FAST: dict[str, str] = {
    "VAULT_BRAIN_SERVER_HEADER_TIMEOUT_SECONDS": "1",
    "VAULT_BRAIN_SERVER_BODY_TIMEOUT_SECONDS": "1",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_http_server(write_vault(tmp_path_factory.mktemp("slow")), FAST)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def patient_server(tmp_path_factory):
    """Timeouts far beyond any pause a test makes: for requests that must be answered."""
    patient = {
        "VAULT_BRAIN_SERVER_HEADER_TIMEOUT_SECONDS": str(HANG_SECONDS),
        "VAULT_BRAIN_SERVER_BODY_TIMEOUT_SECONDS": str(HANG_SECONDS),
    }
    running = start_http_server(write_vault(tmp_path_factory.mktemp("patient")), patient)
    yield running
    running.stop()


def connect(server) -> socket.socket:
    parts = urlsplit(server.url)
    return socket.create_connection((parts.hostname, parts.port), timeout=HANG_SECONDS)


def host(server) -> str:
    return urlsplit(server.url).netloc


def closed(sock: socket.socket, trickle: bytes = b"") -> bool:
    """Whether the server closes `sock` (sending `trickle` every 0.2 s meanwhile) before the
    hang deadline. Any reply bytes before the close are read."""
    deadline = time.monotonic() + HANG_SECONDS
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if trickle:
                sock.sendall(trickle)
            if not sock.recv(65536):
                return True
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return True
    return False


def timeouts_passed(server) -> None:
    """Return once the server has cut off one connection that sent nothing and one whose
    body stopped: its header and body timeouts have run out, by its own clock."""
    with connect(server) as silent, connect(server) as stalled:
        stalled.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: {host(server)}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n{".encode()
        )
        assert closed(silent) and closed(stalled)


def get_health(sock: socket.socket, server) -> bytes:
    sock.sendall(f"GET /health HTTP/1.1\r\nHost: {host(server)}\r\n\r\n".encode())
    sock.settimeout(HANG_SECONDS)
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    return reply


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(server):
    with connect(server) as sock:
        assert closed(sock)


def test_headers_trickled_a_line_at_a_time_are_cut_off_at_the_header_timeout(server):
    with connect(server) as sock:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: {host(server)}\r\n".encode())
        assert closed(sock, trickle=b"X-Slow: 1\r\n")


def test_a_body_trickled_a_byte_at_a_time_is_cut_off_at_the_body_timeout(server):
    with connect(server) as sock:
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: {host(server)}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n{".encode()
        )
        assert closed(sock, trickle=b" ")


def test_a_second_request_trickled_on_a_kept_alive_connection_is_cut_off(server):
    with connect(server) as sock:
        assert get_health(sock, server).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        assert closed(sock, trickle=b"X-Slow: 1\r\n")


def test_a_request_sent_in_pieces_within_the_timeout_is_answered(patient_server):
    server = patient_server
    with connect(server) as sock:
        for piece in (b"GET /hea", f"lth HTTP/1.1\r\nHost: {host(server)}\r\n".encode(), b"\r\n"):
            sock.sendall(piece)
            time.sleep(0.2)  # each piece its own read; the server waits up to its timeout
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_a_kept_alive_connection_idle_past_the_timeouts_still_serves(server):
    # Between requests uvicorn's own keep-alive timeout (5 s) applies, not the header one.
    with connect(server) as sock:
        assert get_health(sock, server).startswith(b"HTTP/1.1 200")
        timeouts_passed(server)
        assert get_health(sock, server).startswith(b"HTTP/1.1 200")


def test_an_mcp_session_outlives_the_timeouts(server):
    # Its event streams are long replies; the deadlines cover reading requests only.
    client = http_client_for(server, token=None)
    try:
        client.wait_indexed()
        timeouts_passed(server)
        assert client.ok("memory_search", {"query": "release"})["results"]
    finally:
        client.close()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    vault = write_vault(tmp_path_factory.mktemp("slow-token"))
    running = start_http_server(vault, {**FAST, "VAULT_BRAIN_TOKEN": TOKEN})
    yield running
    running.stop()


def test_a_body_still_trickling_after_its_401_is_cut_off(token_server):
    with connect(token_server) as sock:
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: {host(token_server)}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{".encode()
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 401")
        assert closed(sock, trickle=b" ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_answers(port: int, timeout: float) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


HALF_REQUESTS = {
    "headers": "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n",
    "body": "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
    "\r\nContent-Length: 100000\r\n\r\n{{",
}


@pytest.mark.slow
@pytest.mark.parametrize("half", sorted(HALF_REQUESTS))
def test_300_held_connections_with_256_fds_do_not_starve_health(tmp_path, half):
    """The reported case: a server process limited to 256 file descriptors, 300 connections
    that send half a request and stop. /health must still answer (the cap keeps fds free
    and a new connection pushes out the oldest one that is not being answered)."""
    vault = write_vault(tmp_path / "vault")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(7)[1]))

    # A free port is probed, then given to the server: another process on the machine may
    # take it in between, and the server then exits saying so. Another port is tried.
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "vault_brain.server", "--http", "--vault", str(vault),
             "--port", str(port)],
            env={**os.environ, **BASE_ENV},
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "stderr.log", "w"),  # noqa: SIM115 - the child owns it
            preexec_fn=limit,
        )  # fmt: skip
        wait_until(
            lambda: proc.poll() is not None or health_answers(port, HANG_SECONDS),  # noqa: B023
            "the server starting",
            every=0.1,
        )
        if proc.poll() is None or "already in use" not in (tmp_path / "stderr.log").read_text():
            break
    held: list[socket.socket] = []
    try:
        assert proc.poll() is None, "the server exited: " + (tmp_path / "stderr.log").read_text()
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=HANG_SECONDS)
            s.sendall(HALF_REQUESTS[half].format(port=port).encode())
            held.append(s)
        # Answered at all, however long a busy machine takes: starved, it would never be.
        answered = sum(health_answers(port, HANG_SECONDS) for _ in range(5))
        assert answered == 5, f"/health answered {answered} of 5 probes"
        assert proc.poll() is None
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(HANG_SECONDS)
    log = (tmp_path / "stderr.log").read_text()
    assert "Too many open files" not in log and "out of system resource" not in log
