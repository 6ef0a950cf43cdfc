"""What `related` costs a memory_get (issue 24 item 2: at most 5 ms per get on cpp-docs).

cpp-docs (~9,700 notes, ~34k chunks) is indexed once by `Brain` (kept with `--index`, reused
next time), vectors included: the instant tier always, e5 only with `--strong e5` (minutes
of embedding). Then, for `--samples` notes drawn at random (seeded), in two kinds of
process:

- server: a long-lived Brain (as `serve` and `watch` hold one), whose vector part reads the
  in-memory matrix (loaded by the first call, reported apart);
- one-shot: `Brain(one_shot=True)`, as the CLI's `vault-brain get` runs, where sqlite-vec's
  KNN answers from the index file.

Timed: the port's `related` call alone (inside a read snapshot, as Brain.get makes it) and a
whole `Brain.get` (file read and parse, links, backlinks, related). p50 and p95 in ms, of
wall time and of the calling thread's CPU time (what a call costs where others share the
machine; numpy's BLAS threads are left as they are).

    .venv/bin/python -m bench.related [--vault DIR] [--index FILE] [--samples 300] \\
        [--strong none|e5] [--json-out f]

Prints JSON on stdout, then a Markdown table (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    machine,
    markdown_table,
    percentile,
    progress,
    shared_dir,
    unpack,
    write_json,
)

TARGET_MS = 5.0


def make_brain(vault: Path, index: Path, strong: str, one_shot: bool) -> Any:
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    overrides = {
        "index": {"path": str(index), "fresh_read_seconds": 86400.0},
        "embed": {"strong": strong},
    }
    return Brain(load_settings(vault=str(vault), env={}, overrides=overrides), one_shot=one_shot)


def index_all(brain: Any) -> float:
    started = time.perf_counter()
    brain.sync()
    while brain.embed_pending() > 0:
        pass
    return time.perf_counter() - started


def ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50) * 1000, 3),
        "p95": round(percentile(values, 95) * 1000, 3),
    }


def measure(brain: Any, paths: list[str]) -> dict[str, Any]:
    from vault_brain.index.records import INSTANT
    from vault_brain.service import RELATED_MAX

    with brain.index.read() as r:
        tier = brain._vector_arm.tier(r)[0]  # the tier Brain.get asks first, as it does
        rowids = [r.note_by_path(p).rowid for p in paths]
    tiers = tuple(dict.fromkeys((tier, INSTANT)))
    started = time.perf_counter()
    with brain.index.read() as r:  # what a process loads once (a server's vector matrix)
        r.related(rowids[0], 1000, tiers)  # so deep that the vectors answer too
    first = time.perf_counter() - started
    related_s, get_s, sizes = [], [], []
    related_cpu, get_cpu = [], []
    for rowid in rowids:
        with brain.index.read() as r:
            t0, c0 = time.perf_counter(), time.thread_time()
            found = r.related(rowid, RELATED_MAX, tiers)
            related_cpu.append(time.thread_time() - c0)
            related_s.append(time.perf_counter() - t0)
        sizes.append(len(found))
    for path in paths:
        t0, c0 = time.perf_counter(), time.thread_time()
        brain.get(path)
        get_cpu.append(time.thread_time() - c0)
        get_s.append(time.perf_counter() - t0)
    return {
        "tier": tier,
        "first_related_ms": round(first * 1000, 1),
        "related_ms": ms(related_s),
        "get_ms": ms(get_s),
        # CPU time of the calling thread: what the call costs on a machine others share
        "related_cpu_ms": ms(related_cpu),
        "get_cpu_ms": ms(get_cpu),
        "mean_related": round(sum(sizes) / len(sizes), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default=None, help="an unpacked cpp-docs (default: unpack)")
    parser.add_argument("--index", default=None, help="keep the index here and reuse it")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--strong", default="none", choices=("none", "e5"))
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vb-related-") as tmp:
        if args.vault:
            vault = Path(args.vault)
        else:
            progress("unpacking cpp-docs")
            vault = unpack(shared_dir() / "corpora" / "cpp-docs.tar.gz", "cpp-docs/docs", Path(tmp))
        index = Path(args.index) if args.index else Path(tmp) / "index.db"
        server = make_brain(vault, index, args.strong, one_shot=False)
        progress("indexing (reused when --index holds it)")
        index_s = index_all(server)
        paths = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
        sample = random.Random(7).sample(paths, min(args.samples, len(paths)))
        progress(f"server: {len(sample)} gets")
        results = {"server": measure(server, sample)}
        server.close()
        one_shot = make_brain(vault, index, args.strong, one_shot=True)
        progress(f"one-shot: {len(sample)} gets")
        results["one_shot"] = measure(one_shot, sample)
        one_shot.close()
    report = {
        "machine": machine(),
        "notes": len(paths),
        "samples": len(sample),
        "index_s": round(index_s, 1),
        "target_ms": TARGET_MS,
        "results": results,
    }
    print(write_json(report, args.json_out))
    print()
    rows = [
        (
            kind,
            r["tier"],
            r["related_ms"]["p50"],
            r["related_ms"]["p95"],
            r["get_ms"]["p50"],
            r["get_ms"]["p95"],
            r["related_cpu_ms"]["p50"],
            r["related_cpu_ms"]["p95"],
            r["get_cpu_ms"]["p50"],
            r["get_cpu_ms"]["p95"],
            r["first_related_ms"],
            r["mean_related"],
        )
        for kind, r in results.items()
    ]
    headers = [
        "process",
        "tier",
        "related p50 ms",
        "related p95 ms",
        "get p50 ms",
        "get p95 ms",
        "related CPU p50",
        "related CPU p95",
        "get CPU p50",
        "get CPU p95",
        "first related ms",
        "related per get",
    ]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
