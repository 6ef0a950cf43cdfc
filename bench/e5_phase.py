"""The e5 phase of a real `vault-brain index`, old code against new (issue 23): CPU seconds a
chunk all in (the model's load, tokenising, the pending-chunks queries, writing vectors,
the calibration at the end) and chunks/s, whole processes.

The vault's full text and instant vectors are indexed once (VAULT_BRAIN_EMBED_STRONG=none,
this code); each run starts from a copy of that cache folder and runs `index` with the
default settings, which embeds every chunk with e5. Runs alternate between the codes.

    .venv/bin/python -m bench.e5_phase --vault cpp-docs --notes 2000 --code /tmp/old --rounds 2

`--code DIR` is another checkout (a git worktree of the commit before the change) run with
this Python. `--with-env KEY=VALUE` adds this checkout once more with that variable set
(an engine option against the default, e.g. VAULT_BRAIN_E5_ENGINE=onnxruntime, or
VAULT_BRAIN_E5_ISA=avx2: e5native's AVX2 path on a CPU with VNNI). Each run's e5 kernel and
its reference agreement are read from the index (meta `strong_kernel`). The kept e5
graph is built in each run (a fresh cache folder), as after an
upgrade.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import copy_vault, cpu_flags  # noqa: E402
from bench.cold_index import index_file, run_index, subset  # noqa: E402
from bench.common import REPO, machine, markdown_table, progress, write_json  # noqa: E402


def strong_kernel(home: Path) -> dict:
    """The e5 kernel the run embedded with and its reference agreement, as the index
    records them (meta `strong_kernel`); nothing where it did not."""
    with sqlite3.connect(index_file(home)) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'strong_kernel'").fetchone()
    try:
        record = json.loads(row[0]) if row and row[0] else {}
        return {"kernel": record["kernel"], "agreement": record.get("agreement")}
    except (ValueError, TypeError, KeyError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="cpp-docs", choices=("cpp-docs", "obsidian"))
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--code", help="the other checkout (before the change)")
    parser.add_argument("--with-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    codes = [("new", REPO, {})] + ([("old", Path(args.code).resolve(), {})] if args.code else [])
    for pair in args.with_env:
        key, _, value = pair.partition("=")
        codes.append((f"new {pair}", REPO, {key: value}))
    with tempfile.TemporaryDirectory(prefix="e5-phase-") as tmp:
        work = Path(tmp)
        vault = copy_vault(args.vault, work / "vault")
        subset(vault, args.notes)
        base = work / "base"
        run_index(REPO, vault, base, {"VAULT_BRAIN_EMBED_STRONG": "none"})
        with sqlite3.connect(index_file(base)) as db:
            chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        runs = []
        for r in range(args.rounds):
            for n, (label, code, env) in enumerate(codes):
                home = work / f"run{n}-{r}"
                shutil.copytree(base, home)
                result = run_index(code, vault, home, env)
                result.update(code=label, round=r, chunks=chunks, **strong_kernel(home))
                result["cpu_ms_a_chunk"] = round(result["cpu_s"] * 1000 / chunks, 1)
                result["chunks_per_s"] = round(chunks / result["wall_s"], 1)
                progress(f"{label} {r}: {result}")
                runs.append(result)
                shutil.rmtree(home)
    rows = []
    for label, _, _ in codes:
        mine = [x for x in runs if x["code"] == label]
        rows.append(
            (
                label,
                statistics.median(x["cpu_ms_a_chunk"] for x in mine),
                statistics.median(x["chunks_per_s"] for x in mine),
                ", ".join(f"{x['load']:.1f}" for x in mine),
                ", ".join(f"{x.get('kernel')} {x.get('agreement')}" for x in mine[:1]),
            )
        )
    record = {"machine": machine(), "cpu_flags": cpu_flags(), "notes": args.notes, "runs": runs}
    print(write_json(record, args.json_out))
    headers = ["code", "CPU-ms a chunk", "chunks/s", "load after each run", "kernel, agreement"]
    print(markdown_table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
