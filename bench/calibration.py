"""The relevance cut-off and the confidence levels on questions nobody tuned on (issue 21).

Per answerable set (bench/eval_sets.py: small everyday vaults, Obsidian Help in eight
languages, a mixed en+ru+zh vault asked in other languages, cpp-docs): the share of
questions whose default reply is empty ("nothing relevant" said falsely), nDCG@10 of the
default reply, and the confidence of its first hit. Per off-topic set of the same vault:
how many questions get no hit at all ("caught"), plain off-topic and near-misses apart.
Dev and held-out parts are reported apart: defaults are chosen on dev only.

Each vault is indexed by `Brain` with the default settings (the instant model and
multilingual-e5-small covering every chunk), calibrated (search/fit.py), and asked through
`Brain.search` with the default cut-off; `--no-fit` asks the same index with the models'
fixed scales instead (the behaviour before the vault calibrated itself).

    .venv/bin/python -m bench.calibration [--sets small-en,obsidian-en,...] \\
        [--keep /tmp/vb-calibration] [--no-fit] [--json-out f]

`--keep DIR` keeps each set's index in DIR (the e5 pass over cpp-docs takes many minutes)
and reuses it on the next run; the vault files are rebuilt each time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, ndcg_at_k, progress, write_json  # noqa: E402
from bench.eval_sets import (  # noqa: E402
    ANSWERABLE,
    available,
    bench_set,
    offtopic_queries,
    offtopic_sets_for,
    split,
)

K = 10
PARTS = ("dev", "held_out")


def make_brain(vault: Path, index: Path) -> Any:
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    overrides = {"index": {"path": str(index), "fresh_read_seconds": 86400.0}}
    return Brain(load_settings(vault=str(vault), env={}, overrides=overrides))


def index_vault(brain: Any, fit: bool) -> dict[str, Any]:
    started = time.perf_counter()
    report = brain.sync()
    while brain.embed_pending() > 0:
        pass
    embedded = time.perf_counter()
    fitted = brain.calibrate() if fit else []
    if not fit:
        _forget_fits(brain)
    status = brain.status()
    return {
        "notes": status.notes,
        "chunks": status.chunks,
        "added": report.added,
        "strong_vectors": status.strong_vectors,
        "index_s": round(embedded - started, 1),
        "calibrate_s": round(time.perf_counter() - embedded, 1),
        "calibrated": fitted,
    }


def _forget_fits(brain: Any) -> None:
    """--no-fit: the index keeps no fit, so the models' fixed scales answer."""
    from vault_brain.search.fit import meta_key

    with brain.index.transaction() as w:
        for tier in ("instant", "strong"):
            w.set_meta(meta_key(tier), None)


def ask_answerable(brain: Any, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in PARTS:
        bs = bench_set(name, part=part)
        empty, ndcgs, first = 0, [], {"high": 0, "medium": 0, "low": 0}
        for qid, text in bs.queries:
            result = brain.search(text, limit=K)
            empty += not result.hits
            ranked = [bs.hit_id(h.path) for h in result.hits]
            ndcgs.append(ndcg_at_k(ranked, bs.qrels[qid], K))
            if result.hits:
                first[result.hits[0].confidence] = first.get(result.hits[0].confidence, 0) + 1
        n = len(bs.queries)
        out[part] = {
            "questions": n,
            "false_empty": empty,
            "false_empty_share": round(empty / n, 4) if n else 0.0,
            "ndcg@10": round(sum(ndcgs) / n, 4) if n else 0.0,
            "first_hit_confidence": first,
        }
    return out


def ask_offtopic(brain: Any, set_name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in PARTS:
        counts: dict[str, dict[str, int]] = {}
        for kind, text in offtopic_queries(set_name, part=part):
            result = brain.search(text, limit=K)
            c = counts.setdefault(kind, {"questions": 0, "caught": 0, "low": 0})
            c["questions"] += 1
            c["caught"] += not result.hits
            c["low"] += bool(result.hits) and result.hits[0].confidence == "low"
        out[part] = counts
    return out


def run_set(name: str, keep: Path | None, fit: bool) -> dict[str, Any]:
    bs = bench_set(name)
    with tempfile.TemporaryDirectory(prefix=f"vb-calibration-{name}-") as tmp:
        vault = bs.build(Path(tmp))
        index = (keep / f"{name}.db") if keep else Path(tmp) / "index.db"
        index.parent.mkdir(parents=True, exist_ok=True)
        brain = make_brain(vault, index)
        try:
            built = index_vault(brain, fit)
            progress(f"{name}: {built}")
            report = {"vault": built, "answerable": ask_answerable(brain, name), "offtopic": {}}
            for off in offtopic_sets_for(name):
                if available(off):
                    report["offtopic"][off] = ask_offtopic(brain, off)
        finally:
            brain.close()
    return report


def _rate(done: int, total: int) -> str:
    return f"{done}/{total}" if total else "–"


def markdown(report: dict[str, Any]) -> str:
    rows = []
    for name, r in report["sets"].items():
        for part in PARTS:
            a = r["answerable"][part]
            plain = near = [0, 0]
            for off in r["offtopic"].values():
                kinds = off[part]
                p, n = kinds.get("off-topic", {}), kinds.get("near-miss", {})
                plain = [plain[0] + p.get("caught", 0), plain[1] + p.get("questions", 0)]
                near = [near[0] + n.get("caught", 0), near[1] + n.get("questions", 0)]
            rows.append(
                [
                    name,
                    part,
                    f"{a['false_empty']}/{a['questions']}",
                    f"{a['ndcg@10']:.3f}",
                    " ".join(f"{k[0]}{v}" for k, v in a["first_hit_confidence"].items()),
                    _rate(*plain),
                    _rate(*near),
                ]
            )
    head = [
        "set",
        "part",
        "false empty",
        "nDCG@10",
        "first hit h/m/l",
        "off-topic caught",
        "near-miss caught",
    ]
    return markdown_table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(ANSWERABLE))
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--no-fit", action="store_true")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    report: dict[str, Any] = {"machine": machine(), "fit": not args.no_fit, "sets": {}}
    for name in names:
        if not available(name):
            progress(f"{name}: skipped (its corpus or data is not here)")
            continue
        split(name)  # fails early on a set without a split
        report["sets"][name] = run_set(name, args.keep, not args.no_fit)
    print(write_json(report, args.json_out))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
