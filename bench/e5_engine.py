"""The e5 tier's engines side by side in one process (issue 23): onnxruntime's int8 graph
(the default) against the fused C engine (VAULT_BRAIN_E5_ENGINE=native, embed/e5_engine.py),
on real cpp-docs chunks as the index embeds them.

Both embedders are loaded once; rounds alternate between them (so a shared machine's load
falls on both alike), each round embedding the chunks in calls of 64 (the index's step) on
1 and on 2 threads. CPU-ms a chunk is the process's CPU time over the calls (tokenising and
the word vectors' inflation included, the same for both); chunks/s is wall time. Also: each
engine's worst cosine with the shipped reference vectors, and the two engines' cosines on
the chunks.

    .venv/bin/python -m bench.e5_engine --vault /tmp/lead/cpp-docs --chunks 400 --rounds 3

`--isa avx2` (or portable) adds the C engine once more on that lower path
(VAULT_BRAIN_E5_ISA, embed/e5_engine.py): the AVX2 path measured on a CPU with VNNI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, write_json  # noqa: E402
from bench.embedders import note_chunks  # noqa: E402

PER_CALL = 64  # the strong tier's step in a CLI index (indexer.STRONG_BATCH)


def embedder(engine: str, threads: int, isa: str = ""):
    from vault_brain.embed import e5_engine
    from vault_brain.embed.e5 import E5Embedder

    os.environ[e5_engine.ENGINE_ENV] = engine
    if isa:
        os.environ[e5_engine.ISA_ENV] = isa
    try:
        e = E5Embedder(threads=threads)
        e.embed(["warm up"])  # load (and the reference check) outside the timing
    finally:
        os.environ.pop(e5_engine.ENGINE_ENV, None)
        os.environ.pop(e5_engine.ISA_ENV, None)
    return e


def timed(e, texts: list[str]) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(texts), PER_CALL):
        e.embed(texts[i : i + PER_CALL])
    return time.process_time() - c0, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="/tmp/lead/cpp-docs")
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--isa", action="append", default=[], help="avx2 or portable")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    import numpy as np

    texts = [text for _, text in note_chunks(Path(args.vault))][: args.chunks]
    engines = {}
    for threads in (int(t) for t in args.threads.split(",")):
        for name, env in (("onnxruntime", "onnxruntime"), ("native", "native")):
            engines[(name, threads)] = embedder(env, threads)
        for isa in args.isa:
            engines[(f"native {isa}", threads)] = embedder("native", threads, isa)
    first = {name: engines[(name, t)] for (name, t) in engines}
    vectors = {name: e.embed(texts) for name, e in first.items()}
    cosines = (vectors["onnxruntime"] * vectors["native"]).sum(axis=1)
    runs: dict[tuple[str, int], list[tuple[float, float]]] = {k: [] for k in engines}
    loads = []
    for _ in range(args.rounds):
        for key, e in engines.items():
            runs[key].append(timed(e, texts))
        loads.append(os.getloadavg()[0])
    rows, record = [], []
    for (name, threads), samples in runs.items():
        cpu = statistics.median(c for c, _ in samples) * 1000 / len(texts)
        wall = statistics.median(w for _, w in samples)
        e = engines[(name, threads)]
        rows.append(
            (
                name,
                threads,
                e.kernel,
                f"{cpu:.2f}",
                ", ".join(f"{c * 1000 / len(texts):.2f}" for c, _ in samples),
                f"{len(texts) / wall:.1f}",
                f"{e.agreement:.5f}",
            )
        )
        record.append(
            dict(
                zip(
                    ("engine", "threads", "kernel", "cpu_ms", "runs", "rate", "agreement"),
                    rows[-1],
                    strict=True,
                )
            )
        )
    out = {
        "machine": machine(),
        "chunks": len(texts),
        "loads": loads,
        "runs": record,
        "cosine_min": float(cosines.min()),
        "cosine_median": float(np.median(cosines)),
    }
    print(write_json(out, args.json_out))
    print(
        markdown_table(
            [
                "engine",
                "threads",
                "kernel",
                "CPU-ms a chunk (median)",
                "runs",
                "chunks/s",
                "reference agreement",
            ],
            rows,
        )
    )
    print(
        f"cosine native vs onnxruntime on {len(texts)} chunks: min {cosines.min():.6f}, "
        f"median {np.median(cosines):.6f}; load after each round {loads}"
    )
    for name in first:
        if name.startswith("native "):
            c = (vectors["onnxruntime"] * vectors[name]).sum(axis=1)
            print(f"cosine {name} vs onnxruntime: min {c.min():.6f}, median {np.median(c):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
