"""Retrieval quality of the real pipeline on the IR sets in ../shared/corpora.

Each document becomes a note `<id>.md` in a temporary vault, indexed by `Brain` (full text +
local vectors), and every judged query runs in the modes fts, vector and hybrid. Hybrid runs
once per fusion setting (RRF k=60 and convex with several vector weights) through the real
`Brain.search`, so the sweep measures the code that ships, not a re-implementation.

    .venv/bin/python -m bench.quality [--sets scifact,npl] [--limit-queries 50] [--json-out f]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    IR_SETS,
    IRSet,
    bench_model,
    doc_id_of,
    load_ir_set,
    machine,
    markdown_table,
    mrr_at_k,
    ndcg_at_k,
    progress,
    recall_at_k,
    write_json,
    write_vault,
)

K = 10
METRICS = {"ndcg@10": ndcg_at_k, "recall@10": recall_at_k, "mrr@10": mrr_at_k}


@dataclass(frozen=True)
class Fusion:
    fusion: str  # "rrf" | "convex"
    vector_weight: float  # used by convex only

    @property
    def label(self) -> str:
        if self.fusion == "rrf":
            return (
                "rrf k=60 1:1"
                if self.vector_weight == 0.5
                else f"rrf k=60 w={self.vector_weight:.1f}"
            )
        return f"convex w={self.vector_weight:.1f}"


# RRF takes the weight too (w = 0.5 is classic 1:1 RRF); sweep both it and a weighted one.
SWEEP = (Fusion("rrf", 0.5), Fusion("rrf", 0.3)) + tuple(
    Fusion("convex", w) for w in (0.1, 0.2, 0.3, 0.4, 0.5)
)


def make_brain(vault: Path, model: str) -> tuple[Any, Any]:
    """A Brain over `vault` with local embeddings; returns (brain, the settings it was given)."""
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    settings = load_settings(
        vault=str(vault),
        env={},
        overrides={
            "embed": {"provider": "local", "model": model},
            # No stat pass before searches: nothing changes the vault while we measure.
            "index": {"fresh_read_seconds": 86400.0},
        },
    )
    return Brain(settings), settings


def set_fusion(brain: Any, settings: Any, fusion: Fusion) -> None:
    """Point the live brain at another fusion: its settings object if it exposes one."""
    search = getattr(getattr(brain, "settings", None), "search", None) or settings.search
    search.fusion = fusion.fusion
    search.vector_weight = fusion.vector_weight
    if fusion.fusion == "rrf":
        search.rrf_k = 60


def run_queries(brain: Any, queries: list[tuple[str, str]], mode: str) -> tuple[list, int]:
    """Ranked doc ids per query, and how many answers said they were degraded."""
    ranked, degraded = [], 0
    for _, text in queries:
        result = brain.search(text, limit=K, mode=mode)
        degraded += bool(result.degraded)
        ranked.append([doc_id_of(hit.path) for hit in result.hits])
    return ranked, degraded


def score(ranked: list[list[str]], queries: list[tuple[str, str]], ir: IRSet) -> dict:
    """Mean of each metric over the judged queries."""
    out = {}
    for name, fn in METRICS.items():
        values = [fn(r, ir.qrels[qid], K) for r, (qid, _) in zip(ranked, queries, strict=True)]
        out[name] = sum(values) / len(values) if values else 0.0
    return out


def run_set(ir: IRSet, model: str, limit_queries: int | None) -> dict:
    queries = list(ir.queries.items())[:limit_queries]
    with tempfile.TemporaryDirectory(prefix=f"vb-quality-{ir.name}-") as tmp:
        vault = Path(tmp) / "vault"
        write_vault(vault, ir.docs)
        brain, settings = make_brain(vault, model)
        try:
            start = time.perf_counter()
            brain.sync()
            synced = time.perf_counter()
            while brain.embed_pending() > 0:
                pass
            embedded = time.perf_counter()
            progress(
                f"{ir.name}: {len(ir.docs)} notes indexed in {synced - start:.1f} s "
                f"+ vectors {embedded - synced:.1f} s; {len(queries)} queries"
            )
            default = Fusion(settings.search.fusion, settings.search.vector_weight)
            modes, ranks, degraded = {}, {}, {}
            for mode in ("fts", "vector"):
                ranks[mode], degraded[mode] = run_queries(brain, queries, mode)
            for fusion in SWEEP:
                set_fusion(brain, settings, fusion)
                ranks[fusion.label], degraded[fusion.label] = run_queries(brain, queries, "hybrid")
            set_fusion(brain, settings, default)
            if default.label not in ranks:
                ranks[default.label], degraded[default.label] = run_queries(
                    brain, queries, "hybrid"
                )
        finally:
            brain.close()
    for label, ranked in ranks.items():
        modes[label] = score(ranked, queries, ir)
    modes["hybrid"] = modes[default.label]
    return {
        "docs": len(ir.docs),
        "queries": len(queries),
        "graded": ir.graded,
        "index_s": round(synced - start, 2),
        "embed_s": round(embedded - synced, 2),
        "default_fusion": default.label,
        "degraded_answers": degraded,
        # If every fusion gives the same lists, the brain did not see the settings change.
        "fusion_changes_results": ranks[SWEEP[0].label] != ranks[SWEEP[-1].label],
        "modes": modes,
    }


def sweep_summary(sets: dict[str, dict]) -> dict:
    """Per fusion: hybrid nDCG@10 − max(fts, vector) on every set, and its worst case."""
    out = {}
    for fusion in SWEEP:
        margins = {}
        for name, res in sets.items():
            m = res["modes"]
            best_arm = max(m["fts"]["ndcg@10"], m["vector"]["ndcg@10"])
            margins[name] = m[fusion.label]["ndcg@10"] - best_arm
        worst_set = min(margins, key=margins.get)
        out[fusion.label] = {
            "margins": margins,
            "worst": margins[worst_set],
            "worst_set": worst_set,
            "mean_ndcg@10": sum(sets[n]["modes"][fusion.label]["ndcg@10"] for n in sets)
            / len(sets),
        }
    return out


def targets(sets: dict[str, dict]) -> dict:
    """The issue's quality targets, checked against the default hybrid."""
    out: dict[str, Any] = {}
    if "scifact" in sets:
        fts = sets["scifact"]["modes"]["fts"]["ndcg@10"]
        out["fts scifact ndcg@10 >= 0.66"] = {"value": fts, "met": fts >= 0.66}
    for name, res in sets.items():
        m = res["modes"]
        floor = max(m["fts"]["ndcg@10"], m["vector"]["ndcg@10"]) - 0.01
        out[f"hybrid {name} >= best arm - 0.01"] = {
            "value": m["hybrid"]["ndcg@10"],
            "floor": floor,
            "met": m["hybrid"]["ndcg@10"] >= floor,
        }
    return out


def markdown(report: dict) -> str:
    sets = report["sets"]
    parts = []
    for metric in METRICS:
        rows = []
        for name, res in sets.items():
            m = res["modes"]
            best = max(m["fts"][metric], m["vector"][metric])
            rows.append(
                [
                    name,
                    res["docs"],
                    res["queries"],
                    m["fts"][metric],
                    m["vector"][metric],
                    m["hybrid"][metric],
                    f"{m['hybrid'][metric] - best:+.3f}",
                ]
            )
        parts.append(f"**{metric}** (hybrid = {report['default_fusion']})\n")
        parts.append(
            markdown_table(
                ["set", "docs", "queries", "fts", "vector", "hybrid", "hybrid − best arm"], rows
            )
        )
        parts.append("")
    names = list(sets)
    rows = []
    for label, s in report["fusion_sweep"].items():
        rows.append(
            [label]
            + [sets[n]["modes"][label]["ndcg@10"] for n in names]
            + [s["mean_ndcg@10"], f"{s['worst']:+.4f} ({s['worst_set']})"]
        )
    parts.append(
        "**Fusion sweep**: hybrid nDCG@10 per set; worst case = min over sets of "
        "hybrid − max(fts, vector)\n"
    )
    parts.append(markdown_table(["fusion"] + names + ["mean", "worst case"], rows))
    parts.append(f"\nBest worst case: **{report['best_fusion']}**\n")
    rows = [[k, v["value"], "yes" if v["met"] else "**no**"] for k, v in report["targets"].items()]
    parts.append(markdown_table(["target", "value", "met"], rows))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(IR_SETS), help="comma-separated set names")
    parser.add_argument("--limit-queries", type=int, default=None, help="first N judged queries")
    parser.add_argument("--model", default=None, help="model2vec folder (default: shared model)")
    parser.add_argument("--json-out", default=None, help="also write the JSON report here")
    args = parser.parse_args(argv)

    from vault_brain.log import set_quiet

    set_quiet(True)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = sorted(set(names) - set(IR_SETS))
    if unknown:
        parser.error(f"unknown sets: {', '.join(unknown)} (known: {', '.join(IR_SETS)})")
    model = bench_model() if args.model is None else args.model
    started = time.perf_counter()
    sets = {}
    for name in names:
        sets[name] = run_set(load_ir_set(name), model, args.limit_queries)
    sweep = sweep_summary(sets)
    report = {
        "bench": "quality",
        "command": "python -m bench.quality " + " ".join(argv or sys.argv[1:]),
        **machine(),
        "model": model or "bundled",
        "k": K,
        "default_fusion": next(iter(sets.values()))["default_fusion"],
        "seconds": round(time.perf_counter() - started, 1),
        "sets": sets,
        "fusion_sweep": sweep,
        "best_fusion": max(sweep, key=lambda label: sweep[label]["worst"]),
        "targets": targets(sets),
    }
    print(markdown(report))
    print()
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
