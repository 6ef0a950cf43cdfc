"""Answers before full coverage (issue 23, with issue 21's trust bounds): who should answer
a hybrid search while the strong (e5) tier's backlog is still running.

The backlog embeds every note's lead chunk first (index/leads.py). Per set, from an index
whose instant and e5 tiers are complete, a working copy's e5 tier is emptied
(reset_vectors) and embedded again through the product's backlog step
(index/vectors.embed_batch, batches of 32, leads first; the vectors come back from the
embedding cache, so no model runs) up to each point: `leads` (every lead in), then shares
of the chunks. At the first point both tiers are fitted on the vectors present
(search/fit.py), so that every rule, the instant tier's too, is read on a fit; with
`--refit` again at each later point. `--product` embeds and fits as the Indexer does
instead (Brain.embed_strong: its walk, and its fit of the e5 part once every lead is in,
again at each tenth more; no instant fit before the tier is complete), so the figures are
the product's. At each point every rule of search/semantic.PARTIAL_RULE answers the set's
questions through `Brain.search` (the real hybrid pipeline):

- `today`: main: the instant tier until e5 covers 99 %, and no fit before every tier is
  complete (the instant model's fixed scale decides the cut-off);
- `instant`: the instant tier until e5 covers 99 %, fitted;
- `strong`: e5 alone from its fit on;
- `max` / `mean`: both vector tiers, a note's score the best / mean of the two, the
  cut-off's evidence the best of the two tiers' (`max:strong`, `mean:strong`: the e5
  tier's alone; `mean:strong` is what search/semantic.py does).

Per part of bench/eval/split.json (dev, held-out): nDCG@10 (min_score 0), questions
answered (a graded-2 note in the top 10), and with the default cut-off (search.min_score)
answerable questions emptied ("nothing relevant" said falsely) and off-topic questions
caught (no hit), plain and near-miss apart. `full` is the complete index as it is.

    VAULT_BRAIN_SHARED=/work/shared .venv/bin/python -m bench.takeover \\
        --sets cpp-docs,obsidian-en,obsidian-de --keep /tmp/takeover/idx \\
        [--points leads,0.6] [--rules instant,strong,max,mean] [--refit] \\
        [--cpp-vault DIR --cpp-index FILE] [--json-out f]

`--keep DIR` holds each set's vault (DIR/vaults/NAME) and complete index (DIR/NAME.db),
built with the default settings when absent; `--cpp-vault/--cpp-index` take cpp-docs'
vault and a complete default index of it instead (its e5 pass takes ~20 CPU-minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, ndcg_at_k, progress, write_json  # noqa: E402
from bench.eval_sets import available, bench_set, offtopic_queries, offtopic_sets_for  # noqa: E402

K = 10
PARTS = ("dev", "held_out")
RULES = ("today", "instant", "strong", "max", "mean")


def make_brain(vault: Path, index: Path) -> Any:
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    overrides = {"index": {"path": str(index), "fresh_read_seconds": 86400.0}}
    return Brain(load_settings(vault=str(vault), env={}, overrides=overrides))


def complete_index(name: str, keep: Path, cpp: tuple[Path, Path] | None) -> tuple[Path, Path]:
    """(vault, complete index) of a set: kept, or built with the default settings."""
    if name == "cpp-docs" and cpp is not None:
        return cpp
    vault = keep / "vaults" / name / "vault"
    db = keep / f"{name}.db"
    if db.is_file() and vault.is_dir():
        return vault, db
    shutil.rmtree(vault.parent, ignore_errors=True)
    vault = bench_set(name).build(vault.parent)
    brain = make_brain(vault, db)
    try:
        started = time.perf_counter()
        brain.sync()
        while brain.embed_pending() > 0:
            pass
        brain.calibrate(force=True)
        progress(f"{name}: indexed in {time.perf_counter() - started:.0f} s")
    finally:
        brain.close()
    return vault, db


def checkpointed_copy(db: Path, out: Path) -> Path:
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(db, out)
    return out


def counts(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    total, leads = con.execute("SELECT count(*), sum(ordinal = 0) FROM chunks").fetchone()
    con.close()
    return total, leads


def empty_strong(brain: Any) -> None:
    """The e5 tier emptied as before its backlog ran (its vectors stay in the cache)."""
    from vault_brain.index.records import STRONG
    from vault_brain.search.fit import meta_key

    with brain.index.read() as r:
        model, dim = r.vectors_model(STRONG)
    with brain.index.transaction() as w:
        w.reset_vectors(model, dim, STRONG)
        for tier in ("instant", "strong"):
            w.set_meta(meta_key(tier), None)


def embed_to(brain: Any, leads: Any, stop: int, done: int) -> int:
    from vault_brain.index.vectors import embed_batch

    while done < stop:
        n = embed_batch(brain.index, brain.strong, min(32, stop - done), "strong", leads=leads)
        if n == 0:
            break
        done += n
    return done


def fit_now(brain: Any) -> dict[str, float]:
    """Both tiers fitted on the vectors present (what the Indexer does once the leads are
    in); returns the seconds each took."""
    from vault_brain.embed.cache import ModelCache
    from vault_brain.search.fit import fit_tier, meta_key

    took = {}
    cache = ModelCache.under(brain.settings.embed.cache_dir)
    for tier, embedder in (("instant", brain.embedder), ("strong", brain.strong)):
        started = time.perf_counter()
        fit = fit_tier(brain.index, embedder, tier, cache)
        took[tier] = round(time.perf_counter() - started, 2)
        with brain.index.transaction() as w:
            w.set_meta(meta_key(tier), fit.to_json() if fit else None)
    return took


def forget_fits(brain: Any) -> dict[str, str | None]:
    """`today`: main fits a vault only once every tier is complete, so during the e5 phase
    the instant tier answers on its model's fixed scale. Returns the fits to restore."""
    from vault_brain.search.fit import meta_key

    kept = {}
    with brain.index.transaction() as w:
        for tier in ("instant", "strong"):
            kept[tier] = w.get_meta(meta_key(tier))
            w.set_meta(meta_key(tier), None)
    return kept


def restore_fits(brain: Any, kept: dict[str, str | None]) -> None:
    from vault_brain.search.fit import meta_key

    with brain.index.transaction() as w:
        for tier, raw in kept.items():
            w.set_meta(meta_key(tier), raw)


def ask(brain: Any, name: str, cut: float, strip: str = "") -> dict[str, Any]:
    """Per part: nDCG@10 and answered (no cut), false empties (default cut), and off-topic
    caught (default cut)."""
    out: dict[str, Any] = {}
    tiers: dict[str, int] = {}
    cpu_ms: list[float] = []
    for part in PARTS:
        bs = bench_set(name, part=part)
        ndcgs, answered, empty = [], 0, 0
        for qid, text in bs.queries:
            started = time.process_time()
            result = brain.search(text, limit=K, min_score=0.0)
            cpu_ms.append((time.process_time() - started) * 1000)
            tiers[str(result.vector_tier)] = tiers.get(str(result.vector_tier), 0) + 1
            ranked = [bs.hit_id(h.path.removeprefix(strip)) for h in result.hits]
            gains = bs.qrels[qid]
            ndcgs.append(ndcg_at_k(ranked, gains, K))
            answered += any(gains.get(p, 0) >= 3 for p in ranked[:K])
            empty += not [h for h in result.hits if h.score >= cut]
        plain, near = [0, 0], [0, 0]
        for off in offtopic_sets_for(name):
            if not available(off):
                continue
            for kind, text in offtopic_queries(off, part=part):
                result = brain.search(text, limit=K, min_score=0.0)
                caught = not [h for h in result.hits if h.score >= cut]
                tally = plain if kind == "off-topic" else near
                tally[0] += caught
                tally[1] += 1
        n = len(bs.queries)
        out[part] = {
            "questions": n,
            "ndcg10": round(sum(ndcgs) / n, 4),
            "answered": answered,
            "false_empty": empty,
            "offtopic_caught": plain,
            "near_miss_caught": near,
        }
    out["tiers"] = tiers
    out["search_cpu_ms_median"] = round(statistics.median(cpu_ms), 2)
    return out


def run_set(name: str, args: argparse.Namespace, cpp: tuple[Path, Path] | None) -> list[dict]:
    from vault_brain.index.leads import Leads
    from vault_brain.search import semantic

    vault, full = complete_index(name, args.keep, cpp)
    # A cpp-docs index of the whole archive holds its notes under docs/, as the questions not.
    strip = "docs/" if name == "cpp-docs" and cpp is not None else ""
    total, lead_count = counts(full)
    rows: list[dict] = []
    brain = make_brain(vault, full)
    cut = brain.settings.search.min_score
    try:
        if "full" in args.points.split(","):
            semantic.PARTIAL_RULE = "instant"
            row = {"set": name, "point": "full", "rule": "any", "chunks": total}
            row.update(ask(brain, name, cut, strip))
            progress(f"{row}")
            rows.append(row)
    finally:
        brain.close()
    work = checkpointed_copy(full, args.keep / f"{name}-work.db")
    brain = make_brain(vault, work)
    try:
        empty_strong(brain)
        leads, done, fitted = Leads(), 0, None
        for point in [p for p in args.points.split(",") if p != "full"]:
            stop = lead_count if point == "leads" else round(float(point) * total)
            cpu = time.process_time()
            if args.product:
                # The Indexer's own backlog step, walk and fits (calibrate(partial=True)):
                # its walk learns that every lead is in from the batch after the last one.
                stop += point == "leads"
                while done < stop and (n := brain.embed_strong(limit=min(32, stop - done))):
                    done += n
                fitted = {"by": "the Indexer"}
            else:
                done = embed_to(brain, leads, stop, done)
            cpu = time.process_time() - cpu
            if not args.product and (fitted is None or args.refit):
                fitted = fit_now(brain)
            for rule in args.rules.split(","):
                # "max:strong": both tiers by their best score, evidence the strong one's.
                score_rule, _, evidence_rule = rule.partition(":")
                semantic.PARTIAL_RULE = "instant" if rule == "today" else score_rule
                semantic.PARTIAL_EVIDENCE = evidence_rule or "max"
                kept = forget_fits(brain) if rule == "today" else None
                row = {
                    "set": name,
                    "point": point,
                    "rule": rule,
                    "chunks": total,
                    "strong_vectors": done,
                    "share": round(done / total, 4),
                    "fit_s": fitted,
                    "embed_from_cache_cpu_s": round(cpu, 2),
                    "load_average_1m": round(os.getloadavg()[0], 2),
                }
                row.update(ask(brain, name, cut, strip))
                if kept is not None:
                    restore_fits(brain, kept)
                progress(f"{row}")
                rows.append(row)
    finally:
        brain.close()
        semantic.PARTIAL_RULE = "instant"
    return rows


def markdown(rows: list[dict]) -> str:
    out = []
    for r in rows:
        for part in PARTS:
            a = r[part]
            out.append(
                [r["set"], r["point"], r.get("share", 1.0), r["rule"], part]
                + [f"{a['ndcg10']:.3f}", f"{a['answered']}/{a['questions']}"]
                + [f"{a['false_empty']}/{a['questions']}"]
                + ["{}/{}".format(*a["offtopic_caught"]), "{}/{}".format(*a["near_miss_caught"])]
            )
    head = ["set", "point", "e5 share", "rule", "part", "nDCG@10", "answered"]
    head += ["false empty", "off-topic caught", "near-miss caught"]
    return markdown_table(head, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="cpp-docs,obsidian-en,obsidian-de")
    parser.add_argument("--keep", type=Path, required=True)
    parser.add_argument("--points", default="full,leads,0.6")
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--refit", action="store_true", help="fit again at each point")
    parser.add_argument(
        "--product", action="store_true", help="embed and fit as the Indexer does (no --refit)"
    )
    parser.add_argument("--cpp-vault", type=Path)
    parser.add_argument("--cpp-index", type=Path)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    args.keep.mkdir(parents=True, exist_ok=True)
    cpp = (args.cpp_vault, args.cpp_index) if args.cpp_vault and args.cpp_index else None
    rows: list[dict] = []
    for name in [s for s in args.sets.split(",") if s]:
        if name != "cpp-docs" and not available(name):
            progress(f"{name}: skipped (its corpus is not here)")
            continue
        rows += run_set(name, args, cpp)
    print(write_json({"machine": machine(), "refit": args.refit, "rows": rows}, args.json_out))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
