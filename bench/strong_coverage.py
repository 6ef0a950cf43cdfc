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
        [--shares 0.1,0.2,0.285,0.4,0.6,0.8,1] [--json-out f]

The vault must have been indexed with the default settings (e5 built).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.common import machine, markdown_table, progress, shared_dir, write_json  # noqa: E402

ORDERS = ("newest", "leads")


def read_questions(name: str) -> list[tuple[str, dict[str, int]]]:
    path = shared_dir() / "corpora" / "questions" / f"{name}-questions.tsv"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, judged = line.split("\t", 1)
        grades = {}
        for item in judged.split(";"):
            note, _, grade = item.strip().rpartition(":")
            if note:
                grades[note] = int(grade)
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
    return vectors, [r[2] for r in rows], rowids, ordinals, model


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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--index", help="index.db (default: <vault>/.vault-brain/index.db)")
    parser.add_argument("--questions", default="cpp-docs")
    parser.add_argument("--shares", default="0.1,0.2,0.285,0.4,0.6,0.8,1")
    parser.add_argument("--partial", action="store_true", help="try it on an unfinished tier")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    db = Path(args.index or Path(args.vault) / ".vault-brain" / "index.db")
    vectors, paths, rowids, ordinals, model = load_chunks(db, args.partial)
    questions = read_questions(args.questions)
    progress(f"{len(paths):,} chunks, {len(questions)} questions, model {model}")

    from vault_brain.embed.e5 import E5Embedder

    queries = np.asarray(E5Embedder().embed_queries([q for q, _ in questions]), dtype=np.float32)
    sims = queries @ vectors.T  # [questions, chunks]
    leads = int((ordinals == 0).sum())
    shares = [float(s) for s in args.shares.split(",")]
    results = [instant_reference(db, questions)]
    for kind in ORDERS:
        ranked_order = order(kind, rowids, ordinals)
        for share in shares:
            n = max(1, round(share * len(paths)))
            have = ranked_order[:n]
            scores_n, recalls = [], []
            for qi, (_, grades) in enumerate(questions):
                ranked = ranked_notes(sims[qi], have, paths)
                scores_n.append(ndcg10(ranked, grades))
                recalls.append(recall10(ranked, grades))
            results.append(
                {
                    "order": kind,
                    "share": share,
                    "chunks": n,
                    "ndcg10": round(float(np.mean(scores_n)), 4),
                    "recall10": round(float(np.mean(recalls)), 4),
                }
            )
    print(
        markdown_table(
            ["order", "share of chunks", "chunks", "nDCG@10", "Recall@10"],
            [[r["order"], r["share"], r["chunks"], r["ndcg10"], r["recall10"]] for r in results],
        )
    )
    report = {
        "machine": machine(),
        "questions": args.questions,
        "chunks": len(paths),
        "lead_chunks": leads,
        "model": model,
        "results": results,
    }
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
