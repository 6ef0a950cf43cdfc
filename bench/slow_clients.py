"""Slow unauthenticated HTTP clients against `vault-brain serve --http` (issue 11, item 12).

Runs the server as its own process with a small file-descriptor limit (`--nofile`, 256 like
macOS's default), opens `--held` connections that each misbehave for `--seconds`, and
meanwhile probes `GET /health` once a second on a fresh connection. Three kinds of slow
client, one run each:

- idle: connects and sends nothing;
- header: sends a request line and then one header line per second, never the blank line;
- body: sends complete headers with `Content-Length: 100000` (POST /mcp, no token) and
  then one body byte per second.

Reported per kind: how many held connections the server accepted, how many it closed
(and after how many seconds, median), and how many /health probes were answered (with the
median latency). Before the fix the server closed none and /health stopped answering.

    .venv/bin/python -m bench.slow_clients [--held 300] [--nofile 256] [--seconds 20]

Prints a Markdown table, then JSON, on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = ("idle", "header", "body")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(vault: Path, port: int, nofile: int, log: Path) -> subprocess.Popen:
    def limit() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

    env = {**os.environ, "VAULT_BRAIN_EMBED_PROVIDER": "none"}
    cmd = [sys.executable, "-m", "vault_brain.server", "--http", "--vault", str(vault)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),  # noqa: SIM115 - the child owns it
        preexec_fn=limit,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if health(port, 1.0) is not None:
            return proc
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def health(port: int, timeout: float) -> float | None:
    """Seconds for one GET /health on a fresh connection, or None when it did not answer."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            data = s.recv(64)
    except OSError:
        return None
    return time.monotonic() - started if data.startswith(b"HTTP/1.1 200") else None


def run_kind(kind: str, port: int, held: int, seconds: float) -> dict:
    sel = selectors.DefaultSelector()
    opened: dict[socket.socket, float] = {}
    closed_after: list[float] = []
    refused = 0
    for _ in range(held):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            refused += 1
            s.close()
            continue
        s.setblocking(False)
        if kind == "header":
            s.send(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        elif kind == "body":
            s.send(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
                "\r\nContent-Length: 100000\r\n\r\n".encode()
            )
        opened[s] = time.monotonic()
        sel.register(s, selectors.EVENT_READ)
    probes: list[float | None] = []
    started = time.monotonic()
    next_tick = started
    while time.monotonic() - started < seconds:
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:  # the server closed it (a 408/503 reply before the close is fine)
                closed_after.append(time.monotonic() - opened.pop(s))
                sel.unregister(s)
                s.close()
        if time.monotonic() >= next_tick:
            next_tick += 1.0
            for s in list(opened):
                try:
                    if kind == "header":
                        s.send(b"X-Slow: 1\r\n")
                    elif kind == "body":
                        s.send(b" ")
                except OSError:
                    pass
            probes.append(health(port, 5.0))
    for s in opened:
        s.close()
    answered = [p for p in probes if p is not None]
    closed_median = round(statistics.median(closed_after), 2) if closed_after else None
    return {
        "kind": kind,
        "held": held,
        "connect_refused": refused,
        "closed_by_server": len(closed_after),
        "closed_after_s_median": closed_median,
        "health_probes": len(probes),
        "health_answered": len(answered),
        "health_ms_median": round(statistics.median(answered) * 1000, 1) if answered else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--held", type=int, default=300)
    parser.add_argument("--nofile", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nHello.\n", encoding="utf-8")
        for kind in KINDS:
            port = free_port()
            proc = start_server(vault, port, args.nofile, Path(tmp) / f"{kind}.log")
            try:
                rows.append(run_kind(kind, port, args.held, args.seconds))
            finally:
                proc.terminate()
                proc.wait(20)
            print(f"{kind}: {rows[-1]}", file=sys.stderr)
    load = os.getloadavg()
    out = {"nofile": args.nofile, "seconds": args.seconds, "loadavg": load, "rows": rows}
    print(f"{args.held} slow connections for {args.seconds:.0f} s, server fd limit {args.nofile}\n")
    print("| client | closed by server | closed after (median s) | /health answered | /health ms |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['kind']} | {r['closed_by_server']}/{r['held']} | "
            f"{r['closed_after_s_median']} | {r['health_answered']}/{r['health_probes']} | "
            f"{r['health_ms_median']} |"
        )
    print()
    print(json.dumps(out, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
