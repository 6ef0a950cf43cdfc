"""Indexing and search speed of the real pipeline on cpp-docs (9,746 notes).

Each run happens in a fresh process (so the peak RSS and the model load are its own) with a
fresh index folder: cold index (sync, then vector catch-up, timed apart), no-op re-sync,
one-file re-sync, search latency over 200 queries drawn from note titles and headings, index
size and peak RSS. Runs with local embeddings and full-text only; medians over the runs.

    .venv/bin/python -m bench.speed [--runs 3] [--json-out f]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import resource
import shutil
import sys
import tarfile
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    bench_model,
    machine,
    markdown_table,
    median,
    percentile,
    progress,
    shared_dir,
    write_json,
)

QUERIES = 200
REPEATS = 3  # no-op and one-file re-syncs per run
_TITLE = re.compile(r'^title:\s*["\']?(.+?)["\']?\s*$', re.MULTILINE)
_HEADING = re.compile(r"^#{1,3} +(.+?)\s*#*\s*$", re.MULTILINE)
_MARKUP = re.compile(r"<[^>]*>|\]\([^)]*\)|[`*\[\]]")


def unpack(archive: Path, into: Path) -> Path:
    """cpp-docs.tar.gz → <into>/cpp-docs (the vault root)."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "cpp-docs"


def draw_queries(vault: Path, count: int = QUERIES, seed: int = 0) -> list[str]:
    """Deterministic queries: note titles and headings, minus boilerplate ("See also")."""
    found: list[str] = []
    for path in sorted(vault.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        found += _TITLE.findall(text[:2000]) + _HEADING.findall(text)
    cleaned = [" ".join(_MARKUP.sub(" ", q).split()) for q in found]
    counts = Counter(cleaned)
    pool = sorted({q for q in cleaned if len(q) >= 4 and counts[q] <= 3})
    return random.Random(seed).sample(pool, min(count, len(pool)))


def _dir_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _latency_ms(brain: Any, queries: list[str], mode: str) -> dict[str, float]:
    for query in queries[:10]:  # warm caches and any lazy loads first
        brain.search(query, limit=10, mode=mode)
    times = []
    for query in queries:
        start = time.perf_counter()
        brain.search(query, limit=10, mode=mode)
        times.append((time.perf_counter() - start) * 1000)
    return {"p50": percentile(times, 50), "p95": percentile(times, 95), "max": max(times)}


def one_run(
    vault: str, index: str, provider: str, model: str, queries: list[str], edit: str
) -> dict:
    """One cold index (into the empty folder `index`) and the measures that follow it."""
    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    index_dir = Path(index)
    settings = load_settings(
        vault=vault,
        env={},
        overrides={
            # The instant tier only: the strong (e5) tier's speed is bench/embedders.py's.
            "embed": {"provider": provider, "model": model, "strong": "none"},
            "index": {"path": str(index_dir / "index.db")},
        },
    )
    # Other work on the machine skews timings; the load average says how much there was.
    out: dict[str, Any] = {"provider": provider, "load_before": os.getloadavg()[0]}
    start = time.perf_counter()
    brain = Brain(settings)
    opened = time.perf_counter()
    report = brain.sync()
    synced = time.perf_counter()
    while provider != "none" and brain.embed_pending() > 0:
        pass
    embedded = time.perf_counter()
    status = brain.status()
    out.update(
        notes=status.notes,
        chunks=status.chunks,
        vectors=status.vectors,
        sync_added=report.added,
        open_s=opened - start,
        sync_s=synced - opened,
        embed_s=embedded - synced,
        cold_s=embedded - start,
    )
    out["notes_per_s"] = status.notes / out["cold_s"]

    noop = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        brain.sync()
        noop.append(time.perf_counter() - t)
    out["noop_resync_s"] = median(noop)

    edited = Path(vault) / edit
    original = edited.read_bytes()
    one, one_embed = [], []
    try:
        for i in range(REPEATS):
            edited.write_bytes(original + f"\nEdited by the speed bench, pass {i}.\n".encode())
            t = time.perf_counter()
            brain.sync()
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            while provider != "none" and brain.embed_pending() > 0:
                pass
            one_embed.append(time.perf_counter() - t)
    finally:
        edited.write_bytes(original)
    brain.sync()
    out["one_file_resync_s"] = median(one)
    out["one_file_embed_s"] = median(one_embed)

    for mode in ("fts", "hybrid") if provider != "none" else ("fts",):
        out[f"{mode}_ms"] = _latency_ms(brain, queries, mode)
    brain.close()
    del brain
    gc.collect()  # per-thread read connections close here, and SQLite folds the WAL back in
    out["load_after"] = os.getloadavg()[0]
    out["index_bytes"] = _dir_bytes(index_dir)
    out["index_files"] = {p.name: p.stat().st_size for p in index_dir.rglob("*") if p.is_file()}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_fresh(*args: Any) -> dict:
    """one_run in a new process, so nothing (model, page of RSS) carries over."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(one_run, *args).result()


def summarise(runs: list[dict]) -> dict:
    """Median of every figure over the runs (latencies: median of each run's p50/p95)."""
    out: dict[str, Any] = {"runs": len(runs)}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            keys = sorted({k for r in runs for k in r[key]})
            out[key] = {k: median([r[key][k] for r in runs if k in r[key]]) for k in keys}
        elif isinstance(value, (int, float)):
            out[key] = median([r[key] for r in runs])
        else:
            out[key] = value
    return out


TARGETS = [
    ("cold index, local embeddings (s)", ("local", "cold_s"), "<=", 30.0),
    ("cold index, full text only (s)", ("none", "cold_s"), "<=", 10.0),
    ("notes/s with vectors", ("local", "notes_per_s"), ">=", 325.0),
    ("no-op re-sync (s)", ("local", "noop_resync_s"), "<=", 0.5),
    ("one-file re-sync (s)", ("local", "one_file_resync_s"), "<=", 0.3),
    ("search p50, hybrid (ms)", ("local", "hybrid_ms", "p50"), "<=", 30.0),
    ("search p95, hybrid (ms)", ("local", "hybrid_ms", "p95"), "<=", 80.0),
    ("search p50, fts (ms)", ("local", "fts_ms", "p50"), "<=", 30.0),
    ("search p95, fts (ms)", ("local", "fts_ms", "p95"), "<=", 80.0),
]


def check_targets(results: dict) -> list[dict]:
    out = []
    for name, (provider, *keys), op, bound in TARGETS:
        if provider not in results:
            continue
        value: Any = results[provider]
        for key in keys:
            value = value[key]
        met = value <= bound if op == "<=" else value >= bound
        out.append({"target": f"{name} {op} {bound:g}", "value": value, "met": met})
    return out


def markdown(report: dict) -> str:
    res = report["results"]
    cols = [p for p in ("local", "none") if p in res]
    heads = {"local": "local embeddings", "none": "full text only"}

    def row(label: str, key: str, scale: float = 1.0, fmt: str = "{:.2f}", sub: str = "") -> list:
        cells = []
        for p in cols:
            value = res[p].get(key)
            if isinstance(value, dict):
                value = value.get(sub)
            cells.append("–" if value is None else fmt.format(value * scale))
        return [label] + cells

    rows = [
        row("notes indexed", "notes", fmt="{:.0f}"),
        row("chunks", "chunks", fmt="{:.0f}"),
        row("cold index total (s)", "cold_s"),
        row("  open (s)", "open_s"),
        row("  sync: parse, chunk, full text (s)", "sync_s"),
        row("  vectors: embed_pending until 0 (s)", "embed_s"),
        row("notes/s (cold)", "notes_per_s", fmt="{:.0f}"),
        row("no-op re-sync (ms)", "noop_resync_s", 1000, "{:.0f}"),
        row("one-file re-sync (ms)", "one_file_resync_s", 1000, "{:.0f}"),
        row("one-file vectors (ms)", "one_file_embed_s", 1000, "{:.0f}"),
        row("search fts p50 (ms)", "fts_ms", fmt="{:.1f}", sub="p50"),
        row("search fts p95 (ms)", "fts_ms", fmt="{:.1f}", sub="p95"),
        row("search hybrid p50 (ms)", "hybrid_ms", fmt="{:.1f}", sub="p50"),
        row("search hybrid p95 (ms)", "hybrid_ms", fmt="{:.1f}", sub="p95"),
        row("index size (MB)", "index_bytes", 1 / 1e6, "{:.1f}"),
        row("peak RSS (MB)", "peak_rss_mb", fmt="{:.0f}"),
    ]
    runs = ", ".join(f"{heads[p]}: {res[p]['runs']}" for p in cols)
    parts = [
        markdown_table(["measure"] + [heads[p] for p in cols], rows),
        f"\nMedians over fresh-process runs ({runs}); {report['queries']} queries.\n",
        markdown_table(
            ["target", "value", "met"],
            [
                [t["target"], f"{t['value']:.3f}", "yes" if t["met"] else "**no**"]
                for t in report["targets"]
            ],
        ),
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="cold runs per setup (median)")
    parser.add_argument("--model", default=None, help="model2vec folder (default: shared model)")
    parser.add_argument("--skip-fts-only", action="store_true", help="only local embeddings")
    parser.add_argument("--json-out", default=None, help="also write the JSON report here")
    args = parser.parse_args(argv)

    archive = shared_dir() / "corpora" / "cpp-docs.tar.gz"
    if not archive.is_file():
        parser.error(f"{archive} not found (set VAULT_BRAIN_SHARED)")
    model = bench_model() if args.model is None else args.model
    setups = ["local"] + ([] if args.skip_fts_only else ["none"])
    with tempfile.TemporaryDirectory(prefix="vb-speed-") as tmp:
        vault = unpack(archive, Path(tmp))
        queries = draw_queries(vault)
        edit = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))[0]
        results = {}
        for provider in setups:
            runs = []
            for i in range(args.runs):
                index = Path(tmp) / f"index-{provider}-{i}"
                index.mkdir()
                try:
                    runs.append(run_fresh(str(vault), str(index), provider, model, queries, edit))
                finally:
                    shutil.rmtree(index, ignore_errors=True)
                progress(
                    f"{provider} run {i + 1}/{args.runs}: cold {runs[-1]['cold_s']:.1f} s "
                    f"({runs[-1]['notes']} notes)"
                )
            results[provider] = summarise(runs)
            results[provider]["all_runs"] = runs
    report = {
        "bench": "speed",
        "command": "python -m bench.speed " + " ".join(argv or sys.argv[1:]),
        **machine(),
        "corpus": "cpp-docs.tar.gz",
        "model": model or "bundled",
        "queries": len(queries),
        "results": results,
    }
    report["targets"] = check_targets(results)
    print(markdown(report))
    print()
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
