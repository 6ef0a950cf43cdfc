"""The e5 KNN a one-shot hybrid search runs (sqlite-vec's exact scan, index/sqlite/store.py
knn_vectors), at a size the indexed vault does not have: the index's e5 vectors copied
`--copies` times into a vec0 table of their own (a subset of cpp-docs' 5,822 vectors six
times: ~35k, cpp-docs' whole 34,252). CPU-ms of the query on a fresh connection (what a
one-shot search pays) and again on the same connection, with SQLite reading pages through
read() (mmap_size 0, the default) and through a memory map (db.MMAP_BYTES); the rows must
be the same.

    .venv/bin/python -m bench.knn_scan --index <index.db> --copies 6 [--k 150] [--runs 9]
        [--work DIR] [--json-out f]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, write_json  # noqa: E402
from vault_brain.index.sqlite.db import _load_vec, pick_binding  # noqa: E402

MMAP_BYTES = 1 << 30  # as vault_brain/index/sqlite/db.py has it


def build(index: Path, copies: int, target: Path) -> tuple[int, bytes]:
    """The replicated table (kept between runs); (rows, a query vector: a stored one)."""
    binding = pick_binding()
    source = binding.connect(str(index))
    _load_vec(source)
    rows = source.execute("SELECT rowid, embedding FROM chunk_vectors_strong").fetchall()
    source.close()
    if not rows:
        raise SystemExit(f"{index}: no e5 vectors (index with the strong tier first)")
    if not target.exists():
        conn = binding.connect(str(target))
        _load_vec(conn)
        dim = len(rows[0][1]) // 4
        conn.execute(
            f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}] distance_metric=cosine)"
        )
        for copy in range(copies):
            base = copy * len(rows)
            conn.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                [(base + i + 1, e) for i, (_, e) in enumerate(rows)],
            )
        conn.commit()
        conn.close()
    return len(rows) * copies, rows[len(rows) // 3][1]


def query_cpu(path: Path, mmap: int, query: bytes, k: int) -> tuple[float, float, list]:
    """(first query's CPU-ms on a fresh connection, a second one's, the rows)."""
    conn = pick_binding().connect(str(path))
    _load_vec(conn)
    conn.execute(f"PRAGMA mmap_size = {mmap}")
    sql = "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance"
    times, rows = [], []
    for _ in range(2):
        started = time.process_time()
        rows = conn.execute(sql, (query, k)).fetchall()
        times.append((time.process_time() - started) * 1000)
    conn.close()
    return times[0], times[1], rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="an index.db with e5 vectors")
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--k", type=int, default=150, help="the search's depth")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--work", default="/tmp", help="where the replicated table is made")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    target = Path(args.work) / f"knn-scan-{args.copies}x.db"
    vectors, query = build(Path(args.index), args.copies, target)
    modes = {"read() per page (before)": 0, "memory map (now)": MMAP_BYTES}
    first: dict[str, list[float]] = {m: [] for m in modes}
    again: dict[str, list[float]] = {m: [] for m in modes}
    answers = {}
    for _ in range(args.runs):  # alternated
        for mode, size in modes.items():
            a, b, rows = query_cpu(target, size, query, args.k)
            first[mode].append(a)
            again[mode].append(b)
            answers[mode] = rows
    same = len({repr(r) for r in answers.values()}) == 1
    rows = [
        [m, vectors, round(statistics.median(first[m]), 1), round(statistics.median(again[m]), 1)]
        for m in modes
    ]
    print(
        markdown_table(
            ["pages read by", "vectors", "CPU-ms, fresh connection", "CPU-ms, again"], rows
        )
    )
    print(f"same rows: {same}; load {os.getloadavg()[0]:.1f}")
    report = {
        "machine": machine(),
        "vectors": vectors,
        "k": args.k,
        "runs": args.runs,
        "cpu_ms_fresh_median": {m: statistics.median(v) for m, v in first.items()},
        "cpu_ms_again_median": {m: statistics.median(v) for m, v in again.items()},
        "same_rows": same,
    }
    print(write_json(report, args.json_out))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
