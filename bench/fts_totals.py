"""What keeping FTS5's totals true across deletes costs (index/sqlite/totals.py), on cpp-docs
(9,746 notes, full text only): two source trees of vault-brain run alternately, each run in
a fresh process on a fresh copy of the vault and a fresh index.

Each run: a cold index; one-note edits, each synced apart; one sync of a batch of edits and
deletes; full-text searches. Wall and CPU seconds (the machine is shared: CPU time is the
steadier figure), and how far FTS5's totals record is from the rows it holds after the
edits (rows and words it still counts that are gone: 0 when exact).

    .venv/bin/python -m bench.fts_totals --code /tmp/base --code . [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, median, shared_dir, write_json  # noqa: E402
from bench.speed import draw_queries, unpack  # noqa: E402

ONE_EDITS = 20  # one-note edits, each synced apart
BATCH_EDITS, BATCH_DELETES = 300, 100  # one sync
QUERIES = 200


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints, decoded here rather than by vault_brain/index/sqlite/totals.py:
    the child imports the tree under test, and the older tree has no such module."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def totals_gap(index: Path) -> dict[str, list[int]]:
    """Per FTS5 table: [rows, words] its averages record counts beyond its rows' sizes."""
    import sqlean

    conn = sqlean.connect(str(index))
    try:
        gap = {}
        for table in ("chunks_fts", "notes_fts"):
            stored = _varints(
                conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()[0]
            )
            rows, words = 0, 0
            for (blob,) in conn.execute(f"SELECT sz FROM {table}_docsize"):
                rows += 1
                words += sum(_varints(blob))
            gap[table] = [stored[0] - rows, sum(stored[1:]) - words]
        return gap
    finally:
        conn.close()


def child(code: str, template: str, out_path: str) -> None:
    """One run of the code at `code` (imported from there), written to out_path as JSON."""
    sys.path.insert(0, code)
    import vault_brain
    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    if not vault_brain.__file__.startswith(code):
        raise SystemExit(f"vault_brain came from {vault_brain.__file__}, not {code}")
    set_quiet(True)
    work = Path(tempfile.mkdtemp(prefix="vb-totals-"))
    try:
        vault = work / "vault"
        shutil.copytree(template, vault)
        index = work / "index" / "index.db"
        settings = load_settings(
            vault=str(vault),
            env={},
            overrides={
                "embed": {"provider": "none", "strong": "none"},
                "index": {"path": str(index)},
            },
        )
        out: dict[str, Any] = {"code": code, "load_before": os.getloadavg()[0]}
        notes = sorted(p for p in vault.rglob("*.md"))
        rng = random.Random(11)
        picked = rng.sample(notes, ONE_EDITS + BATCH_EDITS + BATCH_DELETES)

        def timed(fn: Any) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            return time.perf_counter() - wall, time.process_time() - cpu

        brain = Brain(settings)
        out["cold_wall_s"], out["cold_cpu_s"] = timed(brain.sync)

        walls, cpus = [], []
        for i, path in enumerate(picked[:ONE_EDITS]):
            path.write_text(path.read_text(encoding="utf-8") + f"\nedited {i}\n", encoding="utf-8")
            wall, cpu = timed(brain.sync)
            walls.append(wall)
            cpus.append(cpu)
        out["one_edit_wall_ms"] = median(walls) * 1000
        out["one_edit_cpu_ms"] = median(cpus) * 1000

        for path in picked[ONE_EDITS : ONE_EDITS + BATCH_EDITS]:
            text = path.read_text(encoding="utf-8")
            path.write_text(text[: len(text) // 2] + "\nhalved by the bench\n", encoding="utf-8")
        for path in picked[ONE_EDITS + BATCH_EDITS :]:
            path.unlink()
        out["batch_wall_s"], out["batch_cpu_s"] = timed(brain.sync)

        queries = draw_queries(vault, QUERIES)
        for q in queries[:10]:
            brain.search(q, limit=10, mode="fts")
        walls, cpus = [], []
        for q in queries:
            wall, cpu = timed(lambda q=q: brain.search(q, limit=10, mode="fts"))
            walls.append(wall)
            cpus.append(cpu)
        out["fts_wall_ms"] = median(walls) * 1000
        out["fts_cpu_ms"] = median(cpus) * 1000
        brain.close()
        out["totals_gap"] = totals_gap(index)
        out["load_after"] = os.getloadavg()[0]
        Path(out_path).write_text(json.dumps(out), encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)


FIGURES = (
    ("cold index, wall s", "cold_wall_s"),
    ("cold index, CPU s", "cold_cpu_s"),
    ("one-note edit sync, wall ms (median of 20)", "one_edit_wall_ms"),
    ("one-note edit sync, CPU ms", "one_edit_cpu_ms"),
    (f"{BATCH_EDITS} edits + {BATCH_DELETES} deletes sync, wall s", "batch_wall_s"),
    (f"{BATCH_EDITS} edits + {BATCH_DELETES} deletes sync, CPU s", "batch_cpu_s"),
    ("fts search p50, wall ms", "fts_wall_ms"),
    ("fts search p50, CPU ms", "fts_cpu_ms"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", action="append", required=True, help="a vault-brain tree")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree (median)")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    codes = [str(Path(c).resolve()) for c in args.code]
    with tempfile.TemporaryDirectory(prefix="vb-totals-tpl-") as tmp:
        template = unpack(shared_dir() / "corpora" / "cpp-docs.tar.gz", Path(tmp))
        runs: dict[str, list[dict]] = {c: [] for c in codes}
        for r in range(args.rounds):
            for code in codes if r % 2 == 0 else reversed(codes):
                out = Path(tmp) / "run.json"
                subprocess.run(
                    [sys.executable, "-m", "bench.fts_totals", "--code", code]
                    + ["--child", code, str(template), str(out)],
                    check=True,
                    cwd=Path(__file__).resolve().parents[1],
                )
                runs[code].append(json.loads(out.read_text(encoding="utf-8")))
                print(f"round {r + 1} {code}: done", file=sys.stderr)
    report = {
        "machine": machine(),
        "runs": runs,
        "medians": {
            c: {k: median([x[k] for x in rs]) for _, k in FIGURES} for c, rs in runs.items()
        },
    }
    print(write_json(report, args.json_out))
    rows = []
    for label, key in FIGURES:
        values = [report["medians"][c][key] for c in codes]
        ratio = values[-1] / values[0] if values[0] else float("nan")
        rows.append([label, *(f"{v:.2f}" for v in values), f"{ratio:.2f}"])
    rows.append(
        ["totals gap after the edits (rows, words)"]
        + [str(runs[c][-1]["totals_gap"]) for c in codes]
        + [""]
    )
    print(markdown_table(["figure", *codes, "last / first"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
