"""Hybrid search latency of a Brain held the way a server, watcher or resident holds it, on
an indexed vault with its default settings (e5 answers once it covers the vault), for each
value of OPENBLAS_NUM_THREADS asked (numpy's BLAS threads: vault_brain/__init__.py sets 1
unless the user chose). Each run is a fresh process; runs alternate between the values.
Wall and CPU per query (the process's CPU: BLAS and onnxruntime threads included),
medians and p95 over `--rounds` passes of the queries, after one untimed pass.

    .venv/bin/python -m bench.warm_search --vault /tmp/cpp-docs [--blas 2,1] [--runs 2]
        [--rounds 5] [--json-out f]

The vault must be indexed already (a default `index`), under the XDG_CACHE_HOME this runs with.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    REPO,
    code_commit,
    machine,
    markdown_table,
    median,
    percentile,
    write_json,  # noqa: E402
)

QUERIES = [
    "lambda capture by reference",
    "virtual destructor",
    "std::vector reserve",
    "template specialization",
    "exception safety guarantees",
    "compiler warning C4996",
    "how to link a static library",
    "move semantics rvalue",
    "thread local storage",
    "constexpr if",
]


def measure(vault: str, rounds: int) -> dict[str, list[float]]:
    """In this process: the Brain, one untimed pass, then `rounds` timed passes."""
    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    brain = Brain(load_settings(vault=vault))
    try:
        for query in QUERIES:
            brain.search(query)
        wall: list[float] = []
        cpu: list[float] = []
        for _ in range(rounds):
            for query in QUERIES:
                c, w = time.process_time(), time.perf_counter()
                brain.search(query)
                cpu.append((time.process_time() - c) * 1000)
                wall.append((time.perf_counter() - w) * 1000)
        return {"wall_ms": wall, "cpu_ms": cpu}
    finally:
        brain.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--blas", default="2,1", help="OPENBLAS_NUM_THREADS values")
    parser.add_argument("--runs", type=int, default=2, help="fresh processes per value")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json-out")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.vault, args.rounds)))
        return
    values = args.blas.split(",")
    samples: dict[str, dict[str, list[float]]] = {v: {"wall_ms": [], "cpu_ms": []} for v in values}
    loads = []
    for _ in range(args.runs):
        for value in values:
            out = subprocess.run(
                [sys.executable, "-m", "bench.warm_search", "--vault", args.vault, "--child"]
                + ["--rounds", str(args.rounds)],
                env={**os.environ, "OPENBLAS_NUM_THREADS": value},
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(out.stdout)
            for key in ("wall_ms", "cpu_ms"):
                samples[value][key] += got[key]
            loads.append(os.getloadavg()[0])
    result = {
        "vault": args.vault,
        "commit": code_commit(),
        "machine": machine(),
        "loads": loads,
        "by_blas_threads": {
            v: {
                "cpu_p50_ms": round(median(s["cpu_ms"]), 1),
                "wall_p50_ms": round(median(s["wall_ms"]), 1),
                "wall_p95_ms": round(percentile(s["wall_ms"], 95), 1),
                "queries": len(s["wall_ms"]),
            }
            for v, s in samples.items()
        },
    }
    print(write_json(result, args.json_out))
    rows = [
        (v, r["cpu_p50_ms"], r["wall_p50_ms"], r["wall_p95_ms"], r["queries"])
        for v, r in result["by_blas_threads"].items()
    ]
    print(markdown_table(["OPENBLAS threads", "CPU p50 ms", "wall p50", "wall p95", "n"], rows))


if __name__ == "__main__":
    main()
