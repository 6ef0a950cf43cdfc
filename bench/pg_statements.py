"""Where a search's time goes on Postgres, statement by statement: each statement's server
CPU (its backend's /proc/<pid>/schedstat, ns), wall time and count per search, grouped by
the store method that sent it, and the client's CPU, over the cpp-docs questions.

    .venv/bin/python -m bench.pg_statements --url postgresql://… --schema bench_cpp \
        [--vault DIR] [--mode hybrid] [--reps 2] [--json-out f]

The index must exist (bench/postgres.py builds one); `--vault` is the cpp-docs folder it
was built from (a search's freshness pass is skipped). Linux only (schedstat). Every
psycopg `execute` is wrapped to time it, which adds a little client CPU of its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load_question_set, markdown_table, write_json  # noqa: E402
from bench.postgres import bench_settings  # noqa: E402

PLUMBING = {"_execute", "_all", "_one", "execute", "per_version", "compute", "<lambda>"}


def _sched_ns(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--schema", default="bench_cpp")
    parser.add_argument("--vault", default="/tmp/pgscale/vault/cpp-docs")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--reps", type=int, default=2, help="passes over the questions")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    import psycopg

    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    stats: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    on = [False]
    original = psycopg.Connection.execute

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if not on[0]:
            return original(self, query, params, **kw)
        pid = self.info.backend_pid
        s0, t0 = _sched_ns(pid), time.perf_counter()
        cursor = original(self, query, params, **kw)
        t1, s1 = time.perf_counter(), _sched_ns(pid)
        frames = traceback.extract_stack(limit=8)[:-1]
        caller = next((f.name for f in reversed(frames) if f.name not in PLUMBING), "?")
        entry = stats[(caller, " ".join(str(query).split())[:60])]
        entry[0] += 1
        entry[1] += (t1 - t0) * 1000
        entry[2] += (s1 - s0) / 1e6
        return cursor

    psycopg.Connection.execute = execute  # type: ignore[method-assign]
    queries = list(load_question_set("cpp-docs").queries.values())
    settings = bench_settings(args.url, args.schema, args.vault)
    walls, cpus = [], []
    with Brain(settings) as brain:
        for q in queries:  # warm-up: caches, prepared statements
            brain.search(q, mode=args.mode, limit=10)
        for _ in range(args.reps):
            for q in queries:
                on[0] = True
                c0, t0 = time.process_time(), time.perf_counter()
                brain.search(q, mode=args.mode, limit=10)
                walls.append((time.perf_counter() - t0) * 1000)
                cpus.append((time.process_time() - c0) * 1000)
                on[0] = False
    n = len(walls)
    rows = sorted(
        (
            {
                "method": caller,
                "statement": sql,
                "per_search": round(e[0] / n, 2),
                "wall_ms": round(e[1] / n, 2),
                "server_cpu_ms": round(e[2] / n, 2),
            }
            for (caller, sql), e in stats.items()
        ),
        key=lambda r: -r["server_cpu_ms"],
    )
    report = {
        "schema": args.schema,
        "mode": args.mode,
        "searches": n,
        "wall_p50_ms": round(statistics.median(walls), 1),
        "client_cpu_ms": round(statistics.mean(cpus), 1),
        "server_cpu_ms": round(sum(r["server_cpu_ms"] for r in rows), 1),
        "round_trips": round(sum(r["per_search"] for r in rows), 1),
        "load": " / ".join(Path("/proc/loadavg").read_text().split()[:2]),
        "statements": rows,
    }
    print(write_json(report, args.json_out))
    table = [
        [r["method"], r["statement"], r["per_search"], r["server_cpu_ms"], r["wall_ms"]]
        for r in rows
    ]
    print(markdown_table(["method", "statement", "a search", "server CPU ms", "wall ms"], table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
