"""The e5 tier's rate per batch size (padded tokens per forward pass), fresh processes
alternated (issue 23).

The texts are bench/embedders.py's ~300 chunks of the English Obsidian Help vault (each
longer than the 128-token window, as 98 % of real chunks are), fed 32 to a call as the
strong backlog feeds them. Each (batch_tokens, threads) runs in its own process, the
values alternated round by round, so a shared machine's load falls on all alike; CPU-ms a
chunk is the steadier figure, chunks/s the one a user waits on.

    .venv/bin/python -m bench.e5_batch [--values 256,512,1024] [--rounds 5] [--json-out f]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, write_json  # noqa: E402

PER_CALL = 32  # what the strong backlog hands the embedder per call


def one(texts_file: Path, batch_tokens: int, threads: int, repeat: int) -> dict:
    """Runs in the child: load, warm, then time `repeat` passes over the texts."""
    from vault_brain.embed.e5 import E5Embedder

    texts = json.loads(texts_file.read_text())
    embedder = E5Embedder(threads=threads, batch_tokens=batch_tokens)
    embedder.embed(texts[:PER_CALL])  # load and warm outside the timing
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        for i in range(0, len(texts), PER_CALL):
            embedder.embed(texts[i : i + PER_CALL])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(texts) * repeat
    return {"wall_s": wall, "cpu_s": cpu, "chunks": n, "kernel": embedder.kernel}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", default="256,512,1024")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json-out")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        path, bt, th, rep = args.child
        print(json.dumps(one(Path(path), int(bt), int(th), int(rep))))
        return 0
    from bench.embedders import speed_corpus

    values = [int(v) for v in args.values.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    runs: dict[tuple[int, int], list[dict]] = {(v, t): [] for v in values for t in threads}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        texts, _ = speed_corpus(Path(tmp))
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        for _ in range(args.rounds):
            for key in runs:
                argv_ = [
                    sys.executable,
                    "-m",
                    "bench.e5_batch",
                    "--child",
                    str(texts_file),
                    str(key[0]),
                    str(key[1]),
                    str(args.repeat),
                ]
                out = subprocess.run(
                    argv_,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=Path(__file__).resolve().parents[1],
                    env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
                )
                runs[key].append(json.loads(out.stdout.strip().splitlines()[-1]))
                loads.append(os.getloadavg()[0])
    rows = []
    for (bt, th), rs in runs.items():
        rows.append(
            {
                "batch_tokens": bt,
                "threads": th,
                "kernel": rs[0]["kernel"],
                "chunks_per_s": round(statistics.median(r["chunks"] / r["wall_s"] for r in rs), 1),
                "cpu_ms_per_chunk": round(
                    statistics.median(1000 * r["cpu_s"] / r["chunks"] for r in rs), 2
                ),
            }
        )
    record = {
        "machine": machine(),
        "chunks": len(texts),
        "rounds": args.rounds,
        "load": [min(loads), max(loads)],
        "rows": rows,
    }
    print(write_json(record, args.json_out))
    print(
        markdown_table(
            ["batch tokens", "threads", "kernel", "chunks/s (median)", "CPU-ms a chunk (median)"],
            [tuple(r.values()) for r in rows],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
