"""How well `vault-brain index` foretells the end of its e5 phase (issue 25, item 4).

Embeds the strong tier (multilingual-e5-small) of a real vault the way `index` does (calls
of 64 chunks, newest notes first), records (time, chunks done) after each call, then replays
the record through each estimator of the time left and compares it with the real end:

- `window 30 s` (what `index`, `watch` and `status` use: vault_brain/meter.py), and
  windows of 10 s and 120 s beside it;
- `since start`: chunks done / time since the phase began, model load included (what
  `index` showed before; its ETA said 93-105 min on cpp-docs).

For each, over the samples after the first 5 % of the work: the error of the predicted time
left against the real time left (median and 90th percentile of |error|, as a share of
the real time left), and how far the predicted end moved (max - min, seconds).

    .venv/bin/python -m bench.progress_eta [--vault cpp-docs|obsidian|PATH] [--files N]
        [--json-out f]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import copy_vault  # noqa: E402
from bench.common import machine  # noqa: E402
from vault_brain.config import load_settings  # noqa: E402
from vault_brain.meter import Meter  # noqa: E402
from vault_brain.service import Brain  # noqa: E402

CALL = 64  # chunks per call, as `vault-brain index` asks


def record(vault: Path) -> tuple[list[tuple[float, int]], int, float]:
    """((seconds since the phase began, chunks done) after each call, total, end)."""
    settings = load_settings(vault=str(vault), env={}, overrides={})
    with Brain(settings, one_shot=True) as brain:
        brain.sync()
        brain.embed_pending(strong=False)
        total = brain.status().strong_pending
        samples: list[tuple[float, int]] = []
        started = time.monotonic()
        done = 0
        while n := brain.embed_strong(limit=CALL):
            done += n
            samples.append((time.monotonic() - started, done))
            if len(samples) % 20 == 0:
                print(f"  {done}/{total} chunks, {samples[-1][0]:.0f} s", file=sys.stderr)
    return samples, total, samples[-1][0] if samples else 0.0


def windowed(window: float) -> Callable[[list[tuple[float, int]], int], list[float | None]]:
    def estimate(samples: list[tuple[float, int]], total: int) -> list[float | None]:
        now = [0.0]
        meter = Meter(total, window=window, clock=lambda: now[0])
        out: list[float | None] = []
        for t, done in samples:
            now[0] = t
            meter.update(done)
            out.append(meter.eta())
        return out

    return estimate


def since_start(samples: list[tuple[float, int]], total: int) -> list[float | None]:
    return [(total - done) / (done / t) if t > 0 and done else None for t, done in samples]


ESTIMATORS = {
    "window 30 s (now)": windowed(30.0),
    "window 10 s": windowed(10.0),
    "window 120 s": windowed(120.0),
    "since start (before)": since_start,
}


def judge(
    samples: list[tuple[float, int]], total: int, end: float, etas: list[float | None]
) -> dict[str, float | None]:
    errors, ends = [], []
    for (t, done), eta in zip(samples, etas, strict=True):
        real = end - t
        if done < 0.05 * total or real <= 0 or eta is None:
            continue
        errors.append(abs(eta - real) / real)
        ends.append(t + eta)
    if not errors:
        return {"median_error": None, "p90_error": None, "end_moved_s": None}
    errors.sort()
    return {
        "median_error": round(statistics.median(errors), 3),
        "p90_error": round(errors[int(0.9 * (len(errors) - 1))], 3),
        "end_moved_s": round(max(ends) - min(ends), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vault", default="cpp-docs", help="cpp-docs, obsidian or a folder")
    parser.add_argument("--files", type=int, default=0, help="keep only the first N notes")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        if Path(args.vault).is_dir():
            shutil.copytree(args.vault, vault, ignore=shutil.ignore_patterns(".vault-brain"))
        else:
            copy_vault(args.vault, vault)
        if args.files:
            for path in sorted(vault.rglob("*.md"))[args.files :]:
                path.unlink()
        samples, total, end = record(vault)
    result = {
        "machine": machine(),
        "vault": args.vault,
        "files": args.files or None,
        "chunks": total,
        "seconds": round(end, 1),
        "chunks_per_s": round(total / end, 1) if end else None,
        "estimators": {
            name: judge(samples, total, end, estimate(samples, total))
            for name, estimate in ESTIMATORS.items()
        },
    }
    print(json.dumps(result, indent=2))
    print(f"\n{result['chunks']:,} chunks in {result['seconds']} s on {args.vault}\n")
    print("| estimator | median error of time left | p90 error | predicted end moved |")
    print("| --- | --- | --- | --- |")
    for name, j in result["estimators"].items():
        print(f"| {name} | {j['median_error']} | {j['p90_error']} | {j['end_moved_s']} s |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
