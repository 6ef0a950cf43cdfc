"""MCP server benchmark on cpp-docs (9,746 notes), through real transports and the `mcp` client.

cpp-docs is unpacked into a temp folder and indexed with `vault-brain index` (bundled local
embeddings), then `vault-brain serve --http` runs as its own process on a loopback port with a
bearer token, the way Open WebUI would reach it. Measured, client side (call → reply):

- `memory_search`: one session, sequential, `--queries` (200) drawn from note titles and
  headings, after 10 warm-up calls; default mode (hybrid) and limit.
- `memory_save`: one session, sequential, `--saves` (100) small unique notes into a folder.
- concurrent writers: `--writers` (8) sessions, one asyncio task each, saving unique notes as
  fast as they can for `--duration` seconds (30). Then every acknowledged save is checked on
  disk (its file exists, holds its id and its content) and in the index (`memory_list` of the
  folder, and an `fts` search for a sample of the saved words): nothing lost, nothing doubled.
- stdio: from spawning `vault-brain serve --stdio` to the `initialize` answer, `--spawns` (5)
  times after the HTTP server has stopped; median.

The server's own per-call `latency_ms` (its JSON log line per tool call) is read back too, so
the gap to the client figure is the MCP/HTTP stack's share; for searches, `Brain.search`'s own
`ms` (its `search` log line) splits the server's share once more.

    .venv/bin/python -m bench.mcp [--duration 30] [--instant-only] [--json-out f]

Prints a Markdown table, then JSON, on stdout (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: `bench/` must not shadow the `mcp` package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import httpx2  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_types import LATEST_PROTOCOL_VERSION  # noqa: E402

from bench.common import (  # noqa: E402
    machine,
    markdown_table,
    median,
    percentile,
    progress,
    shared_dir,
    write_json,
)
from bench.speed import draw_queries, unpack  # noqa: E402

SAVE_FOLDER = "bench-mcp/sequential"
WRITERS_FOLDER = "bench-mcp/writers"
WARMUP = 10
INDEX_SAMPLE = 50  # acknowledged concurrent saves looked up by full-text search
START_TIMEOUT_S = 120.0
CALL_TIMEOUT_S = 60.0
MAX_SAVES_PER_WRITER = 100_000  # a bound on the loop besides the clock

TARGETS = [
    ("memory_search p50 (ms)", ("search", "client_ms", "p50"), 25.0),
    ("memory_save p50 (ms)", ("save", "client_ms", "p50"), 60.0),
    ("8 writers p95 (ms)", ("writers", "client_ms", "p95"), 500.0),
    ("8 writers lost notes", ("writers", "lost"), 0),
    ("8 writers doubled notes", ("writers", "doubled"), 0),
    ("stdio initialize, median (s)", ("stdio", "median_s"), 1.5),
]


# --- the server process ---------------------------------------------------------------------


def cli() -> list[str]:
    """`vault-brain` from this interpreter's environment (what MCP clients spawn)."""
    script = Path(sys.executable).parent / "vault-brain"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "vault_brain"]


# --instant-only: settings every process of the run gets (the strong tier off), so a run
# compares with code that had only the instant model; empty = the shipped defaults.
RUN_SETTINGS: dict[str, str] = {}


def server_env(**extra: str) -> dict[str, str]:
    """The caller's environment minus any VAULT_BRAIN_* settings: defaults, bundled model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    return {**env, **RUN_SETTINGS, **extra}


def build_index(vault: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [*cli(), "index", "--vault", str(vault), "--json"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"vault-brain index failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    return {
        "seconds": time.perf_counter() - started,
        "notes": report["added"] + report["updated"] + report["unchanged"],
        "vectors": report["vectors_written"],
        "pending_vectors": report["pending_vectors"],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_events(path: Path, start: int = 0) -> tuple[list[dict[str, Any]], int]:
    """JSON log lines of the server from byte `start`; returns them and the new offset."""
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read()
    end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
    events = []
    for line in data[:end].splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events, start + end


@dataclass
class HttpServer:
    process: subprocess.Popen
    url: str
    token: str
    log_path: Path
    log_offset: int = 0

    def new_events(self) -> list[dict[str, Any]]:
        events, self.log_offset = log_events(self.log_path, self.log_offset)
        return events

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def start_http(vault: Path, log_path: Path) -> HttpServer:
    """`vault-brain serve --http` on a free loopback port; returns once its start-up
    reconcile is done (so the measures don't race the watcher's first stat pass)."""
    port, token = free_port(), secrets.token_hex(16)
    errlog = log_path.open("wb")
    process = subprocess.Popen(
        [*cli(), "serve", "--http", "--host", "127.0.0.1", "--port", str(port)]
        + ["--vault", str(vault)],
        env=server_env(VAULT_BRAIN_TOKEN=token),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    errlog.close()
    server = HttpServer(process, f"http://127.0.0.1:{port}", token, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    healthy = reconciled = False
    status = "no answer"
    while time.monotonic() < deadline and not (healthy and reconciled):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}); log: {log_path}")
        if not healthy:
            try:
                reply = httpx2.get(server.url + "/health", timeout=2)
                healthy, status = reply.status_code == 200, str(reply.status_code)
            except httpx2.HTTPError as exc:
                status = type(exc).__name__
        reconciled = reconciled or any(
            e.get("event") == "watch_reconcile" for e in server.new_events()
        )
        time.sleep(0.1)
    if not (healthy and reconciled):
        server.stop()
        raise RuntimeError(
            f"the server was not ready after {START_TIMEOUT_S:.0f} s (/health: {status}, "
            f"start-up reconcile done: {reconciled}); log: {log_path}"
        )
    return server


# --- the client -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    ms: float
    is_error: bool
    data: Any


@asynccontextmanager
async def session(server: HttpServer) -> AsyncIterator[ClientSession]:
    """One MCP session over Streamable HTTP with the bearer token, initialized."""
    headers = {"Authorization": f"Bearer {server.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S) as http:
        async with streamable_http_client(server.url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as client:
                await client.initialize()
                yield client


async def call(client: ClientSession, name: str, arguments: dict[str, Any]) -> Call:
    started = time.perf_counter()
    result = await client.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT_S)
    ms = (time.perf_counter() - started) * 1000
    return Call(ms, bool(result.is_error), json.loads(result.content[0].text))


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values),
    }


def server_ms(events: list[dict[str, Any]], tool: str) -> dict[str, float]:
    """The server's own latency_ms for one tool (its JSON log line per call)."""
    return spread(
        [e["latency_ms"] for e in events if e.get("event") == "tool" and e.get("tool") == tool]
    )


# --- the measures ---------------------------------------------------------------------------


async def bench_search(server: HttpServer, queries: list[str]) -> dict[str, Any]:
    async with session(server) as client:
        for query in queries[:WARMUP]:
            await call(client, "memory_search", {"query": query})
        server.new_events()
        calls = [await call(client, "memory_search", {"query": q}) for q in queries]
    events = server.new_events()
    ok = [c for c in calls if not c.is_error]
    return {
        "queries": len(queries),
        "errors": len(calls) - len(ok),
        "degraded": sum(1 for c in ok if c.data.get("degraded")),
        "mean_hits": sum(len(c.data["results"]) for c in ok) / max(len(ok), 1),
        "client_ms": spread([c.ms for c in calls]),
        "server_ms": server_ms(events, "memory_search"),
        "brain_ms": spread([e["ms"] for e in events if e.get("event") == "search"]),
    }


def small_note(label: str, word: str) -> dict[str, Any]:
    """A small note whose content is unique (identical content would be a duplicate_of)."""
    return {
        "title": f"MCP bench {label}",
        "content": (
            f"A short note saved by the MCP benchmark ({label}). It carries the word {word} "
            "so a full-text search finds exactly this note.\n\n- one point\n- another point\n"
        ),
        "tags": ["bench"],
    }


async def bench_save(server: HttpServer, count: int, nonce: str) -> dict[str, Any]:
    async with session(server) as client:
        server.new_events()
        calls = []
        for i in range(count):
            args = small_note(f"sequential {i}", f"vbm{nonce}s{i}")
            calls.append(await call(client, "memory_save", {**args, "folder": SAVE_FOLDER}))
    return {
        "saves": count,
        "errors": sum(1 for c in calls if c.is_error),
        "duplicates": sum(1 for c in calls if not c.is_error and "duplicate_of" in c.data),
        "client_ms": spread([c.ms for c in calls]),
        "server_ms": server_ms(server.new_events(), "memory_save"),
    }


@dataclass
class Writer:
    acks: list[tuple[str, str, str]] = field(default_factory=list)  # (id, path, word)
    ms: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)


async def write_until(server: HttpServer, n: int, nonce: str, deadline: float) -> Writer:
    """One writer: its own session, saving unique notes back to back until the deadline."""
    out = Writer()
    async with session(server) as client:
        for i in range(MAX_SAVES_PER_WRITER):
            if time.monotonic() >= deadline:
                break
            word = f"vbm{nonce}w{n}n{i}"
            args = {**small_note(f"writer {n} note {i}", word), "folder": WRITERS_FOLDER}
            try:
                reply = await call(client, "memory_save", args)
            except Exception as exc:  # noqa: BLE001 - counted: a save that got no answer
                out.errors[type(exc).__name__] += 1
                continue
            out.ms.append(reply.ms)
            if reply.is_error:
                out.errors[reply.data.get("code", "?")] += 1
            elif "duplicate_of" in reply.data:
                out.errors["DUPLICATE_OF"] += 1
            else:
                out.acks.append((reply.data["id"], reply.data["path"], word))
    return out


# YAML may quote an id (`id: '0xbb2fc7'` is how an id that reads as a number is written).
_ID_LINE = re.compile(r"""^id:\s*(['"]?)(\S+?)\1\s*$""", re.MULTILINE)
_WORD = re.compile(r"\bvbm[0-9a-z]+\b")


def check_disk(vault: Path, acks: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Every acknowledged save is one file holding its id and its word; no file is extra."""
    files: dict[str, tuple[str | None, set[str]]] = {}
    for path in sorted((vault / WRITERS_FOLDER).rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        found = _ID_LINE.search(text)
        files[path.relative_to(vault).as_posix()] = (
            found.group(2) if found else None,
            set(_WORD.findall(text)),
        )
    holders: Counter = Counter(w for _, words in files.values() for w in words)
    lost = [
        (note_id, path, word)
        for note_id, path, word in acks
        if path not in files or files[path][0] != note_id or word not in files[path][1]
    ]
    acked = {word for _, _, word in acks}
    where: dict[str, list[str]] = {}
    for path, (_, words) in files.items():
        for w in words:
            where.setdefault(w, []).append(path)
    return {
        "files": len(files),
        "lost": len(lost),
        # What a lost save looks like: its reply, and what the disk holds instead.
        "lost_sample": [
            {
                "ack_id": note_id,
                "ack_path": path,
                "word": word,
                "file_id": files[path][0] if path in files else None,
                "word_found_in": where.get(word, []),
            }
            for note_id, path, word in lost[:5]
        ],
        "doubled": sum(1 for word in acked if holders[word] > 1),
        "unacknowledged_files": sum(1 for _, words in files.values() if not words & acked),
        "duplicate_ids": len(acks) - len({note_id for note_id, _, _ in acks}),
    }


async def check_index(server: HttpServer, acks: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The index agrees: the folder lists exactly the acknowledged ids, and a sample of the
    saved words is found by full-text search (read your writes)."""
    listed: list[str] = []
    async with session(server) as client:
        cursor = None
        for _ in range(len(acks) // 100 + 10):  # bounded: pages of 100 plus slack
            args: dict[str, Any] = {"folder": WRITERS_FOLDER, "limit": 100}
            if cursor:
                args["cursor"] = cursor
            page = await call(client, "memory_list", args)
            listed += [n["id"] for n in page.data["notes"]]
            cursor = page.data["next_cursor"]
            if not cursor:
                break
        step = max(1, len(acks) // INDEX_SAMPLE)
        sample = acks[::step][:INDEX_SAMPLE]
        found = 0
        for note_id, _, word in sample:
            reply = await call(client, "memory_search", {"query": word, "mode": "fts", "limit": 3})
            found += any(h["id"] == note_id for h in reply.data["results"])
    acked = {note_id for note_id, _, _ in acks}
    return {
        "listed": len(listed),
        "listed_twice": len(listed) - len(set(listed)),
        "missing_from_list": len(acked - set(listed)),
        "unexpected_in_list": len(set(listed) - acked),
        "search_sample": len(sample),
        "search_found": found,
    }


async def bench_writers(
    server: HttpServer, vault: Path, writers: int, duration: float, nonce: str
) -> dict[str, Any]:
    server.new_events()
    cpu_before = cpu_times(server.process.pid)
    started = time.monotonic()
    results = await asyncio.gather(
        *(write_until(server, n, nonce, started + duration) for n in range(writers))
    )
    elapsed = time.monotonic() - started
    cpu = cpu_spent(cpu_before, cpu_times(server.process.pid))
    events = server.new_events()
    acks = [a for w in results for a in w.acks]
    errors = sum((w.errors for w in results), Counter())
    disk = check_disk(vault, acks)
    index = await check_index(server, acks)
    return {
        "writers": writers,
        "duration_s": elapsed,
        "acknowledged": len(acks),
        "saves_per_s": len(acks) / elapsed,
        "per_writer": [len(w.acks) for w in results],
        "errors": dict(errors),
        "lost": disk["lost"] + index["missing_from_list"],
        "doubled": disk["doubled"] + disk["duplicate_ids"] + index["listed_twice"],
        "disk": disk,
        "index": index,
        "client_ms": spread([ms for w in results for ms in w.ms]),
        "server_ms": server_ms(events, "memory_save"),
        "watch_batches": sum(1 for e in events if e.get("event") == "watch_batch"),
        # CPU seconds over the run: is the server, the client, or the machine the limit?
        "cpu": {
            **cpu,
            "server_ms_per_save": 1000 * cpu["server_s"] / max(1, len(acks)),
            "client_ms_per_save": 1000 * cpu["client_s"] / max(1, len(acks)),
        },
    }


def cpu_times(pid: int) -> dict[str, float]:
    """CPU seconds so far of the server process, of this (client) process, and of the
    machine (busy and total, all cores), from /proc; zeros where /proc is absent."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        jiffies = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = jiffies[3] + jiffies[4]  # idle + iowait
        busy, total = (sum(jiffies) - idle) / tick, sum(jiffies) / tick
    except (OSError, IndexError, ValueError):
        server = busy = total = 0.0
    return {"server": server, "client": time.process_time(), "busy": busy, "total": total}


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    total = after["total"] - before["total"]
    return {
        "server_s": after["server"] - before["server"],
        "client_s": after["client"] - before["client"],
        "machine_busy": (after["busy"] - before["busy"]) / total if total else 0.0,
    }


def initialize_once(vault: Path, log_path: Path) -> float:
    """Seconds from spawning `vault-brain serve --stdio` to its `initialize` answer."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "vault-brain-bench", "version": "0"},
        },
    }
    with log_path.open("ab") as errlog:
        started = time.perf_counter()
        process = subprocess.Popen(
            [*cli(), "serve", "--stdio", "--vault", str(vault)],
            env=server_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
        )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(request).encode() + b"\n")
        process.stdin.flush()
        with selectors.DefaultSelector() as sel:
            sel.register(process.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=START_TIMEOUT_S):
                raise RuntimeError("no initialize answer from the stdio server")
            line = process.stdout.readline()
        elapsed = time.perf_counter() - started
        reply = json.loads(line)
        if reply.get("id") != 1 or "result" not in reply:
            raise RuntimeError(f"unexpected initialize answer: {line[:200]!r}")
        return elapsed
    finally:
        process.stdin.close()  # the client goes away: the server ends
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def bench_stdio(vault: Path, spawns: int, log_path: Path) -> dict[str, Any]:
    times = [initialize_once(vault, log_path) for _ in range(spawns)]
    return {"spawns": spawns, "median_s": median(times), "min_s": min(times), "all_s": times}


# --- report ---------------------------------------------------------------------------------


def check_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, keys, bound in TARGETS:
        value: Any = results
        for key in keys:
            value = value[key]
        out.append({"target": f"{name} <= {bound:g}", "value": value, "met": value <= bound})
    return out


def markdown(report: dict[str, Any]) -> str:
    r = report["results"]
    s, v, w, io = r["search"], r["save"], r["writers"], r["stdio"]

    def row(label: str, part: dict[str, Any]) -> list[str]:
        c, sv = part["client_ms"], part["server_ms"]
        return [
            label,
            str(c["n"]),
            f"{c['p50']:.1f}",
            f"{c['p95']:.1f}",
            f"{c['max']:.0f}",
            f"{sv.get('p50', float('nan')):.1f}",
            f"{sv.get('p95', float('nan')):.1f}",
        ]

    latency = markdown_table(
        ["call", "n", "p50 ms", "p95 ms", "max ms", "server p50 ms", "server p95 ms"],
        [
            row("memory_search (sequential, hybrid)", s),
            row("memory_save (sequential)", v),
            row(f"memory_save ({w['writers']} concurrent writers)", w),
        ],
    )
    checks = markdown_table(
        ["check", "value"],
        [
            [
                "memory_search: Brain.search p50 / p95 (ms)",
                f"{s['brain_ms']['p50']:.1f} / {s['brain_ms']['p95']:.1f}",
            ],
            ["memory_search: degraded / errors", f"{s['degraded']} / {s['errors']}"],
            [
                f"writers: saves acknowledged in {w['duration_s']:.0f} s",
                f"{w['acknowledged']} ({w['saves_per_s']:.1f}/s)",
            ],
            ["writers: errors", json.dumps(w["errors"]) if w["errors"] else "0"],
            ["writers: files on disk", str(w["disk"]["files"])],
            ["writers: lost / doubled", f"{w['lost']} / {w['doubled']}"],
            [
                "writers: CPU per save, server / client (ms); machine busy",
                f"{w['cpu']['server_ms_per_save']:.2f} / {w['cpu']['client_ms_per_save']:.2f}; "
                f"{w['cpu']['machine_busy']:.0%}",
            ],
            ["writers: listed by memory_list", str(w["index"]["listed"])],
            [
                "writers: found by fts search (sample)",
                f"{w['index']['search_found']} / {w['index']['search_sample']}",
            ],
            [
                f"stdio initialize, median of {io['spawns']} (s)",
                f"{io['median_s']:.2f} (min {io['min_s']:.2f})",
            ],
        ],
    )
    targets = markdown_table(
        ["target", "value", "met"],
        [
            [
                t["target"],
                f"{t['value']:.3g}" if isinstance(t["value"], float) else str(t["value"]),
                "yes" if t["met"] else "**no**",
            ]
            for t in report["targets"]
        ],
    )
    return "\n\n".join([latency, checks, targets])


async def measure(server: HttpServer, vault: Path, args: argparse.Namespace) -> dict[str, Any]:
    nonce = secrets.token_hex(3)
    queries = draw_queries(vault, args.queries)
    progress(f"memory_search: {len(queries)} queries")
    search = await bench_search(server, queries)
    progress(f"memory_save: {args.saves} saves")
    save = await bench_save(server, args.saves, nonce)
    progress(f"{args.writers} writers for {args.duration:g} s")
    writers = await bench_writers(server, vault, args.writers, args.duration, nonce)
    return {"search": search, "save": save, "writers": writers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="memory_search calls")
    parser.add_argument("--saves", type=int, default=100, help="sequential memory_save calls")
    parser.add_argument("--writers", type=int, default=8, help="concurrent writer sessions")
    parser.add_argument("--duration", type=float, default=30.0, help="writers run (s)")
    parser.add_argument("--spawns", type=int, default=5, help="stdio servers started")
    parser.add_argument("--json-out", default=None, help="also write the JSON report here")
    parser.add_argument("--keep", action="store_true", help="keep the temp vault and logs")
    parser.add_argument(
        "--from-vault", default=None, help="an indexed vault to copy instead of unpack + index"
    )
    parser.add_argument(
        "--instant-only",
        action="store_true",
        help="the strong (e5) tier off: vectors of the instant static model only",
    )
    args = parser.parse_args(argv)
    if args.instant_only:
        RUN_SETTINGS["VAULT_BRAIN_EMBED_STRONG"] = "none"

    archive = shared_dir() / "corpora" / "cpp-docs.tar.gz"
    if not args.from_vault and not archive.is_file():
        parser.error(f"{archive} not found (set VAULT_BRAIN_SHARED)")
    tmp = Path(tempfile.mkdtemp(prefix="vb-mcp-"))
    try:
        if args.from_vault:
            vault = tmp / "vault"
            shutil.copytree(args.from_vault, vault, symlinks=True)
            progress(f"copied {args.from_vault}; bringing its index up to date")
        else:
            vault = unpack(archive, tmp)
            progress(f"indexing {vault} with `vault-brain index`")
        index = build_index(vault)
        progress(f"indexed {index['notes']} notes in {index['seconds']:.1f} s; starting the server")
        server = start_http(vault, tmp / "http.log")
        try:
            results = asyncio.run(measure(server, vault, args))
        finally:
            server.stop()
        progress(f"stdio: {args.spawns} spawns")
        results["stdio"] = bench_stdio(vault, args.spawns, tmp / "stdio.log")
        results["index"] = index
    finally:
        if args.keep:
            progress(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report = {
        "bench": "mcp",
        "command": "python -m bench.mcp " + " ".join(argv if argv is not None else sys.argv[1:]),
        **machine(),
        "corpus": "cpp-docs.tar.gz",
        "transport": "Streamable HTTP on 127.0.0.1 (bearer token); stdio for initialize",
        "results": results,
    }
    report["targets"] = check_targets(results)
    print(markdown(report))
    print()
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
