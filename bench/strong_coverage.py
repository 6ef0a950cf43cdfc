"""How soon the e5 tier answers as well as it will (issue 23): the e5 arm alone, on a question
set, when only part of a vault's chunks have e5 vectors, in the order the backlog embeds them.

A default `index` of cpp-docs spends most of its time on the e5 tier (34,252 chunks). The
question is what order of the backlog makes the arm useful soonest. From an index whose e5
tier is complete (its vectors are read from the embedding cache), each ordering is cut at
growing shares of the chunks and the questions are asked of the vectors embedded by then
(dense retrieval: a note scores its best chunk; nDCG@10 with gains 2^grade - 1, Recall@10):

- `newest`: the backlog's order today (chunk rowid descending: a vault indexed in one pass is
  embedded from its last path to its first).
- `leads`: every note's first chunk (its title, lead and opening section), then the rest.

    .venv/bin/python -m bench.strong_coverage --vault /tmp/cpp-docs [--questions cpp-docs] \\
        [--shares 0.1,0.2,leads,0.4,0.6,0.8,1] [--json-out f]

The vault must have been indexed with the default settings (e5 built).

`--embed-to 0.1,0.2,leads` measures instead of simulating, from an index whose e5 tier is
still empty (an `index` run with VAULT_BRAIN_EMBED_STRONG=none): on a copy of it per order,
the product's backlog step (index/vectors.embed_batch, the Indexer's batches of 32, with
`leads` as the order says) embeds with e5 up to each share (`leads`: as many chunks as the
vault has notes, the moment a leads-first backlog has embedded every lead), and the
questions are asked of the vectors the copy holds then. It records the CPU seconds of
each order's embedding. `--query-cost` walks a copy's whole strong backlog in each order
without a model (zero vectors stored through the port) and times the pending-chunks query
per batch (CPU ms: total, median, max).

    .venv/bin/python -m bench.strong_coverage --vault /tmp/cpp-docs --index /tmp/instant.db \\
        --embed-to 0.1,0.2,leads [--query-cost] [--json-out f]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.common import (  # noqa: E402
    QUESTION_SETS,
    machine,
    markdown_table,
    nfc,
    progress,
    shared_dir,
    write_json,
)

ORDERS = ("newest", "leads")


def read_questions(name: str) -> list[tuple[str, dict[str, int]]]:
    """A question set by its bench name (bench/common.QUESTION_SETS: cpp-docs, obsidian-de,
    ...) or its file's stem before `-questions`; note paths NFC, as the index holds them."""
    file = QUESTION_SETS.get(name, f"{name}-questions.tsv")
    path = shared_dir() / "corpora" / "questions" / file
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, judged = line.split("\t", 1)
        grades = {}
        for item in judged.split(";"):
            note, _, grade = item.strip().rpartition(":")
            if note:
                grades[nfc(note)] = int(grade)
        out.append((query, grades))
    return out


def ndcg10(ranked: list[str], grades: dict[str, int]) -> float:
    gain = sum((2 ** grades.get(p, 0) - 1) / math.log2(i + 2) for i, p in enumerate(ranked[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return gain / best if best else 0.0


def recall10(ranked: list[str], grades: dict[str, int]) -> float:
    relevant = {p for p, g in grades.items() if g > 0}
    return len(relevant & set(ranked[:10])) / len(relevant) if relevant else 0.0


def answered10(ranked: list[str], grades: dict[str, int]) -> bool:
    """The answer (a note graded 2) is among the first 10."""
    return any(grades.get(p, 0) >= 2 for p in ranked[:10])


def scores(
    sims: np.ndarray, have: np.ndarray, paths: list[str], questions: list
) -> dict[str, float | int]:
    """nDCG@10, Recall@10 and questions answered in the top 10, from the chunks `have`."""
    n, r, a = [], [], 0
    for qi, (_, grades) in enumerate(questions):
        ranked = ranked_notes(sims[qi], have, paths) if len(have) else []
        n.append(ndcg10(ranked, grades))
        r.append(recall10(ranked, grades))
        a += answered10(ranked, grades)
    return {
        "ndcg10": round(float(np.mean(n)), 4),
        "recall10": round(float(np.mean(r)), 4),
        "answered10": a,
    }


Chunks = tuple[np.ndarray, list[str], np.ndarray, np.ndarray, str]


def load_chunks(db: Path, partial: bool = False, tier: str = "strong") -> Chunks:
    """(vectors [n, 384], note path per chunk, rowid per chunk, ordinal per chunk, model)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    row = con.execute("SELECT value FROM meta WHERE key = ?", (f"{tier}_model",)).fetchone()
    if row is None:
        raise SystemExit(f"{db}: no e5 vectors (index it with the default settings first)")
    model = row[0]
    rows = con.execute(
        """SELECT c.rowid, c.ordinal, n.path, e.vector FROM chunks c
           JOIN notes n ON n.rowid = c.note_rowid
           JOIN embed_cache e ON e.model = ? AND e.text_hash = c.text_hash
           ORDER BY c.rowid""",
        (model,),
    ).fetchall()
    total = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    if len(rows) < total and not partial:
        raise SystemExit(f"{db}: {len(rows)} of {total} chunks have e5 vectors; finish `index`")
    vectors = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    rowids = np.asarray([r[0] for r in rows])
    ordinals = np.asarray([r[1] for r in rows])
    return vectors, [nfc(r[2]) for r in rows], rowids, ordinals, model


def order(kind: str, rowids: np.ndarray, ordinals: np.ndarray) -> np.ndarray:
    newest = np.argsort(-rowids, kind="stable")
    if kind == "newest":
        return newest
    first = ordinals[newest] == 0
    return np.concatenate([newest[first], newest[~first]])


def ranked_notes(sims: np.ndarray, have: np.ndarray, paths: list[str]) -> list[str]:
    """Notes by their best chunk among `have`."""
    best: dict[str, float] = {}
    for c in have[np.argsort(-sims[have])[:200]]:
        best.setdefault(paths[c], float(sims[c]))
    return sorted(best, key=best.get, reverse=True)  # type: ignore[arg-type]


def instant_reference(db: Path, questions: list[tuple[str, dict[str, int]]]) -> dict:
    """The instant tier, complete: what answers until the e5 tier takes over."""
    from vault_brain.config import EmbedSettings
    from vault_brain.embed import make_embedder

    vectors, paths, _, _, _ = load_chunks(db, tier="embed")
    embedder = make_embedder(EmbedSettings())
    queries = np.asarray(embedder.embed([q for q, _ in questions]), dtype=np.float32)
    sims = queries @ vectors.T
    every = np.arange(len(paths))
    ranked = [ranked_notes(sims[i], every, paths) for i in range(len(questions))]
    grades = [g for _, g in questions]
    return {
        "order": "instant tier (complete)",
        "share": 1.0,
        "chunks": len(paths),
        "ndcg10": round(float(np.mean(list(map(ndcg10, ranked, grades)))), 4),
        "recall10": round(float(np.mean(list(map(recall10, ranked, grades)))), 4),
        "answered10": sum(map(answered10, ranked, grades)),
    }


def copy_index(db: Path, into: Path, name: str) -> Path:
    """A copy of the index file (its WAL checkpointed first) that a run may change."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    out = into / f"{name}.db"
    shutil.copyfile(db, out)
    return out


def open_copy(vault: str, db: Path):  # -> vault_brain.index.port.Index
    from vault_brain.config import load_settings
    from vault_brain.index.factory import open_index

    settings = load_settings(vault=vault, env={}, overrides={"index": {"path": str(db)}})
    return settings, open_index(settings)


def held_strong(db: Path) -> tuple[np.ndarray, list[str], int]:
    """(e5 vectors the strong tier holds, note path per vector, lead chunks among them)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    model = con.execute("SELECT value FROM meta WHERE key = 'strong_model'").fetchone()[0]
    rows = con.execute(
        """SELECT c.ordinal, n.path, e.vector FROM chunks c
           JOIN notes n ON n.rowid = c.note_rowid
           JOIN embed_cache e ON e.model = ? AND e.text_hash = c.text_hash
           WHERE c.strong_state = 1 ORDER BY c.rowid""",
        (model,),
    ).fetchall()
    con.close()
    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return vectors, [nfc(r[1]) for r in rows], sum(1 for r in rows if r[0] == 0)


def measured(args: argparse.Namespace, db: Path, questions: list, queries: np.ndarray) -> list:
    """Each order of the product's backlog, really embedded with e5 up to each share."""
    from vault_brain.embed import make_strong_embedder
    from vault_brain.embed.cache import ModelCache
    from vault_brain.index.leads import Leads
    from vault_brain.index.vectors import embed_batch

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    total, leads = con.execute("SELECT count(*), sum(ordinal = 0) FROM chunks").fetchone()
    con.close()
    stops = sorted(
        {
            leads if s == "leads" else max(1, round(float(s) * total))
            for s in args.embed_to.split(",")
        }
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="strong-coverage-") as tmp:
        for kind in ORDERS:
            copy = copy_index(db, Path(tmp), kind)
            settings, index = open_copy(args.vault, copy)
            e5 = make_strong_embedder(settings.embed, ModelCache.under(settings.embed.cache_dir))
            assert e5 is not None, "the default settings build the e5 tier"
            done, cpu = 0, 0.0
            leads = Leads() if kind == "leads" else None  # as the Indexer walks them
            try:
                for stop in stops:
                    started = time.process_time()
                    while done < stop:
                        n = embed_batch(index, e5, min(32, stop - done), "strong", leads=leads)
                        if n == 0:
                            break
                        done += n
                    cpu += time.process_time() - started
                    vectors, paths, held_leads = held_strong(copy)
                    sims = queries @ vectors.T if len(paths) else np.zeros((len(questions), 0))
                    row = {
                        "order": kind,
                        "share": round(done / total, 4),
                        "chunks": done,
                        "lead_chunks": held_leads,
                        **scores(sims, np.arange(len(paths)), paths, questions),
                        "embed_cpu_s": round(cpu, 1),
                        "load_average_1m": round(os.getloadavg()[0], 2),
                    }
                    progress(f"{row}")
                    results.append(row)
            finally:
                index.close()
    return results


def query_cost(args: argparse.Namespace, db: Path) -> list[dict]:
    """The pending-chunks query over a whole strong backlog (no model: zero vectors stored
    through the port): main's order, leads first with the Indexer's walk (index/leads.py),
    and leads first asked from the start every batch (no walk)."""
    from vault_brain.index.leads import Leads
    from vault_brain.index.records import LeadsFirst

    out = []
    with tempfile.TemporaryDirectory(prefix="strong-query-") as tmp:
        for kind in (*ORDERS, "leads, no walk"):
            copy = copy_index(db, Path(tmp), kind.replace(" ", "_").replace(",", ""))
            _, index = open_copy(args.vault, copy)
            walk = Leads() if kind == "leads" else None
            try:
                with index.transaction() as w:
                    w.reset_vectors("bench-zero", 384, "strong")
                zero = np.zeros(384, dtype=np.float32).tobytes()
                ms = []
                while True:
                    order = walk.order if walk else LeadsFirst() if kind != "newest" else None
                    with index.read() as r:
                        started = time.process_time()
                        pending = r.pending_chunks(32, "strong", leads=order)
                        ms.append((time.process_time() - started) * 1000)
                    if not pending:
                        break
                    items = [(p.rowid, p.text_hash, zero) for p in pending]
                    with index.transaction() as w:
                        w.store_vectors("bench-zero", items, "strong")
                    if walk:
                        walk.embedded(pending, 32, order)
            finally:
                index.close()
            out.append(
                {
                    "order": kind,
                    "batches": len(ms),
                    "query_cpu_ms_total": round(sum(ms), 1),
                    "query_cpu_ms_median": round(statistics.median(ms), 3),
                    "query_cpu_ms_max": round(max(ms), 2),
                }
            )
            progress(f"{out[-1]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--index", help="index.db (default: <vault>/.vault-brain/index.db)")
    parser.add_argument("--questions", default="cpp-docs")
    parser.add_argument("--shares", default="0.1,0.2,0.285,0.4,0.6,0.8,1")
    parser.add_argument("--partial", action="store_true", help="try it on an unfinished tier")
    parser.add_argument(
        "--embed-to", help="embed for real up to these shares (`leads`: the notes' count)"
    )
    parser.add_argument("--query-cost", action="store_true", help="time the pending query")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    db = Path(args.index or Path(args.vault) / ".vault-brain" / "index.db")
    questions = read_questions(args.questions)
    report: dict = {"machine": machine(), "questions": args.questions}
    if args.query_cost:
        report["query_cost"] = query_cost(args, db)
        print(
            markdown_table(
                ["order", "batches", "CPU ms in all", "median", "max"],
                [
                    [r["order"], r["batches"], r["query_cpu_ms_total"]]
                    + [r["query_cpu_ms_median"], r["query_cpu_ms_max"]]
                    for r in report["query_cost"]
                ],
            )
        )
    if args.embed_to:
        from vault_brain.embed.e5 import E5Embedder

        queries = np.asarray(
            E5Embedder().embed_queries([q for q, _ in questions]), dtype=np.float32
        )
        results = [instant_reference(db, questions), *measured(args, db, questions, queries)]
        report["measured"] = results
        print(
            markdown_table(
                ["order", "share of chunks", "chunks", "leads among them", "nDCG@10"]
                + ["Recall@10", "answered (top 10)", "e5 CPU s"],
                [
                    [r["order"], r["share"], r["chunks"], r.get("lead_chunks", "")]
                    + [r["ndcg10"], r["recall10"], f"{r['answered10']}/{len(questions)}"]
                    + [r.get("embed_cpu_s", "")]
                    for r in results
                ],
            )
        )
    if not (args.query_cost or args.embed_to):
        report.update(simulated(args, db, questions))
    print(write_json(report, args.json_out))
    return 0


def simulated(args: argparse.Namespace, db: Path, questions: list) -> dict:
    """Each order cut at growing shares of a complete e5 tier (vectors from the cache)."""
    vectors, paths, rowids, ordinals, model = load_chunks(db, args.partial)
    progress(f"{len(paths):,} chunks, {len(questions)} questions, model {model}")

    from vault_brain.embed.e5 import E5Embedder

    queries = np.asarray(E5Embedder().embed_queries([q for q, _ in questions]), dtype=np.float32)
    sims = queries @ vectors.T  # [questions, chunks]
    leads = int((ordinals == 0).sum())
    sizes = sorted(
        {
            leads if s == "leads" else max(1, round(float(s) * len(paths)))
            for s in args.shares.split(",")
        }
    )
    results = [instant_reference(db, questions)]
    for kind in ORDERS:
        ranked_order = order(kind, rowids, ordinals)
        for n in sizes:
            results.append(
                {"order": kind, "share": round(n / len(paths), 4), "chunks": n}
                | scores(sims, ranked_order[:n], paths, questions)
            )
    print(
        markdown_table(
            ["order", "share of chunks", "chunks", "nDCG@10", "Recall@10", "answered (top 10)"],
            [
                [r["order"], r["share"], r["chunks"], r["ndcg10"], r["recall10"]]
                + [f"{r['answered10']}/{len(questions)}"]
                for r in results
            ],
        )
    )
    return {"chunks": len(paths), "lead_chunks": leads, "model": model, "results": results}


if __name__ == "__main__":
    sys.exit(main())
