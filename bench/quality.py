"""Retrieval quality of the real pipeline on the question sets and the IR sets in
../shared/corpora.

Question sets (`questions`: cpp-docs, obsidian-de/fr/es/ja) are natural-language questions
over real vaults: the archive's vault folder is unpacked into a temp folder as it is (notes,
frontmatter, folders) and indexed by `Brain`. IR sets (`ir`: scifact, cranfield, ...) become
one note `<id>.md` per document. Every judged query runs in the modes fts, vector and hybrid
(limit 10); hybrid runs once per fusion setting (RRF k=60 and convex with several vector
weights) through the real `Brain.search`, on one index per set, so the sweep measures the
code that ships, not a re-implementation.

    .venv/bin/python -m bench.quality [--sets questions,ir | cpp-docs,scifact] \
        [--limit-queries 50] [--set text.languages=de] [--json-out f]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    IR_SETS,
    QUESTION_SETS,
    bench_model,
    doc_id_of,
    load_ir_set,
    load_question_set,
    machine,
    markdown_table,
    mrr_at_k,
    ndcg_at_k,
    nfc,
    progress,
    recall_at_k,
    unpack,
    write_json,
    write_vault,
)

K = 10
METRICS = {"ndcg@10": ndcg_at_k, "recall@10": recall_at_k, "mrr@10": mrr_at_k}


@dataclass(frozen=True)
class Fusion:
    fusion: str  # a name in vault_brain.search.fusion.FUSERS
    vector_weight: float

    @property
    def label(self) -> str:
        if self.fusion == "rrf":
            return (
                "rrf k=60 1:1"
                if self.vector_weight == 0.5
                else f"rrf k=60 w={self.vector_weight:.1f}"
            )
        return f"{self.fusion} w={self.vector_weight:.1f}"


# RRF takes the weight too (w = 0.5 is classic 1:1 RRF); convex over a range of vector
# weights. (Ranking by the calibrated evidence itself, a noisy OR or a weighted mean, was
# measured too and dropped: worst case -0.035 and -0.028 against convex w=0.4's -0.013.)
SWEEP = (Fusion("rrf", 0.5), Fusion("rrf", 0.3)) + tuple(
    Fusion("convex", w) for w in (0.2, 0.3, 0.4, 0.5, 0.6)
)
# Every score is calibrated (search/calibration.py); the cut-off is measured under these
# orders (the fusion decides which hits are in the top 10).
CUTOFF_FUSIONS = tuple(f for f in SWEEP if f.fusion == "convex")
CUTOFFS = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)


GROUPS = {"questions": tuple(QUESTION_SETS), "ir": IR_SETS}
GROUPS["all"] = GROUPS["questions"] + GROUPS["ir"]


@dataclass(frozen=True)
class BenchSet:
    """A set to measure, whatever its source: how to build its vault and how to judge hits."""

    name: str
    kind: str  # "questions" | "ir"
    queries: list[tuple[str, str]]  # (query id, text), judged queries only
    qrels: dict[str, dict[str, float]]  # query id -> {hit id: gain}
    graded: bool
    build: Callable[[Path], Path]  # writes or unpacks the vault under a folder, returns it
    hit_id: Callable[[str], str]  # a hit's vault-relative path -> the id the qrels use
    language: str = "en"  # the vault's language (its off-topic questions are in it)


def ir_bench_set(name: str) -> BenchSet:
    ir = load_ir_set(name)

    def build(folder: Path) -> Path:
        write_vault(folder / "vault", ir.docs)
        return folder / "vault"

    return BenchSet(name, "ir", list(ir.queries.items()), ir.qrels, ir.graded, build, doc_id_of)


def question_bench_set(name: str) -> BenchSet:
    qs = load_question_set(name)

    def build(folder: Path) -> Path:
        vault = unpack(qs.archive, qs.root, folder)
        on_disk = {nfc(p.relative_to(vault).as_posix()) for p in vault.rglob("*.md")}
        missing = {p for judged in qs.qrels.values() for p in judged} - on_disk
        if missing:
            raise SystemExit(f"{name}: judged notes not in the vault: {sorted(missing)[:5]}")
        return vault

    language = name.rsplit("-", 1)[-1] if name.startswith("obsidian") else "en"
    return BenchSet(
        name, "questions", list(qs.queries.items()), qs.qrels, True, build, nfc, language
    )


def bench_set(name: str) -> BenchSet:
    return question_bench_set(name) if name in QUESTION_SETS else ir_bench_set(name)


def make_brain(vault: Path, model: str, extra: dict[str, dict[str, Any]]) -> tuple[Any, Any]:
    """A Brain over `vault` with local embeddings; returns (brain, the settings it was given)."""
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    overrides: dict[str, dict[str, Any]] = {
        "embed": {"provider": "local", "model": model},
        # No stat pass before searches: nothing changes the vault while we measure.
        "index": {"fresh_read_seconds": 86400.0},
    }
    for section, values in extra.items():
        overrides.setdefault(section, {}).update(values)
    settings = load_settings(vault=str(vault), env={}, overrides=overrides)
    return Brain(settings), settings


def set_fusion(brain: Any, settings: Any, fusion: Fusion) -> None:
    """Point the live brain at another fusion: its settings object if it exposes one."""
    search = getattr(getattr(brain, "settings", None), "search", None) or settings.search
    search.fusion = fusion.fusion
    search.vector_weight = fusion.vector_weight
    if fusion.fusion == "rrf":
        search.rrf_k = 60


def run_queries(
    brain: Any,
    queries: list[tuple[str, str]],
    mode: str,
    hit_id: Callable[[str], str],
    scores: list | None = None,
) -> tuple[list, int]:
    """Ranked hit ids per query, and how many answers said they were degraded. With
    `scores`, each query's hit scores are appended to it too."""
    ranked, degraded = [], 0
    for _, text in queries:
        result = brain.search(text, limit=K, mode=mode, min_score=0.0)
        degraded += bool(result.degraded)
        ranked.append([hit_id(hit.path) for hit in result.hits])
        if scores is not None:
            scores.append([hit.score for hit in result.hits])
    return ranked, degraded


def offtopic_tops(brain: Any, language: str, mode: str = "hybrid") -> list[float]:
    """The best score each question the vault cannot answer gets (0 when no hit)."""
    from bench.offtopic import offtopic_queries

    tops = []
    for _, text in offtopic_queries(language):
        hits = brain.search(text, limit=K, mode=mode, min_score=0.0).hits
        tops.append(max((h.score for h in hits), default=0.0))
    return tops


def cutoff_counts(ranked, scores, qrels, queries, tops) -> dict[str, dict[str, float]]:
    """Per cut-off: judged-relevant hits in the top 10 it would drop (of all there), and
    how many questions the vault cannot answer would still get a hit."""
    out = {}
    for t in CUTOFFS:
        kept = dropped = 0
        for ids, sc, (qid, _) in zip(ranked, scores, queries, strict=True):
            for hit, s in zip(ids, sc, strict=True):
                if qrels[qid].get(hit, 0) > 0:
                    if s >= t:
                        kept += 1
                    else:
                        dropped += 1
        out[f"{t:.2f}"] = {
            "relevant_kept": kept,
            "relevant_dropped": dropped,
            "offtopic_answered": sum(1 for s in tops if s >= t),
            "offtopic": len(tops),
        }
    return out


def score(ranked: list[list[str]], bs: BenchSet, queries: list[tuple[str, str]]) -> dict:
    """Mean of each metric over the judged queries."""
    out = {}
    for name, fn in METRICS.items():
        values = [fn(r, bs.qrels[qid], K) for r, (qid, _) in zip(ranked, queries, strict=True)]
        out[name] = sum(values) / len(values) if values else 0.0
    return out


def run_set(
    bs: BenchSet, model: str, limit_queries: int | None, extra: dict[str, dict[str, Any]]
) -> dict:
    queries = bs.queries[:limit_queries]
    with tempfile.TemporaryDirectory(prefix=f"vb-quality-{bs.name}-") as tmp:
        vault = bs.build(Path(tmp))
        brain, settings = make_brain(vault, model, extra)
        try:
            start = time.perf_counter()
            report = brain.sync()
            synced = time.perf_counter()
            while brain.embed_pending() > 0:
                pass
            embedded = time.perf_counter()
            languages = note_languages(brain)
            progress(
                f"{bs.name}: {report.added} notes indexed in {synced - start:.1f} s "
                f"+ vectors {embedded - synced:.1f} s; {len(queries)} queries"
            )
            default = Fusion(settings.search.fusion, settings.search.vector_weight)
            modes, ranks, degraded = {}, {}, {}
            for mode in ("fts", "vector"):
                ranks[mode], degraded[mode] = run_queries(brain, queries, mode, bs.hit_id)
            cutoffs = {}
            for fusion in SWEEP:
                set_fusion(brain, settings, fusion)
                hit_scores: list = []
                ranks[fusion.label], degraded[fusion.label] = run_queries(
                    brain, queries, "hybrid", bs.hit_id, hit_scores
                )
                if fusion in CUTOFF_FUSIONS:
                    tops = offtopic_tops(brain, bs.language)
                    cutoffs[fusion.label] = cutoff_counts(
                        ranks[fusion.label], hit_scores, bs.qrels, queries, tops
                    )
            set_fusion(brain, settings, default)
            if default.label not in ranks:
                ranks[default.label], degraded[default.label] = run_queries(
                    brain, queries, "hybrid", bs.hit_id
                )
        finally:
            brain.close()
    for label, ranked in ranks.items():
        modes[label] = score(ranked, bs, queries)
    modes["hybrid"] = modes[default.label]
    per_query = {
        mode: [
            round(ndcg_at_k(r, bs.qrels[qid], K), 4)
            for r, (qid, _) in zip(ranks[label], queries, strict=True)
        ]
        for mode, label in (("fts", "fts"), ("vector", "vector"), ("hybrid", default.label))
    }
    return {
        "kind": bs.kind,
        "notes": report.added,
        "queries": len(queries),
        "graded": bs.graded,
        "index_s": round(synced - start, 2),
        "embed_s": round(embedded - synced, 2),
        "note_languages": languages,
        "default_fusion": default.label,
        "degraded_answers": degraded,
        # If every fusion gives the same lists, the brain did not see the settings change.
        "fusion_changes_results": ranks[SWEEP[0].label] != ranks[SWEEP[-1].label],
        "modes": modes,
        "cutoffs": cutoffs,
        "per_query_ndcg@10": {"ids": [qid for qid, _ in queries], **per_query},
    }


def note_languages(brain: Any) -> dict[str, int]:
    """How many notes the analyser put in each language (stray languages show here)."""
    with brain.index.read() as r:
        return r.note_languages()


def run_fts_only(
    bs: BenchSet,
    limit_queries: int | None,
    extra: dict[str, dict[str, Any]],
    sweep: list[tuple[str, str, Any]] = (),
) -> dict:
    """Full text alone (no embedding provider): a quick look at the analyser's changes."""
    queries = bs.queries[:limit_queries]
    extra = {**extra, "embed": {**extra.get("embed", {}), "provider": "none"}}
    with tempfile.TemporaryDirectory(prefix=f"vb-quality-{bs.name}-") as tmp:
        vault = bs.build(Path(tmp))
        brain, settings = make_brain(vault, "", extra)
        try:
            start = time.perf_counter()
            report = brain.sync()
            synced = time.perf_counter()
            hit_scores: list = []
            ranked, _ = run_queries(brain, queries, "fts", bs.hit_id, hit_scores)
            searched = time.perf_counter()
            # Full text alone is also what a hybrid search answers while vectors are not
            # built yet: its cut-off must hold on its own.
            tops = offtopic_tops(brain, bs.language, mode="fts")
            cutoffs = cutoff_counts(ranked, hit_scores, bs.qrels, queries, tops)
            languages = note_languages(brain)
            swept = {}
            for section, key, value in sweep:
                target = getattr(brain.settings, section)
                before = getattr(target, key)
                setattr(target, key, value)
                runs, _ = run_queries(brain, queries, "fts", bs.hit_id)
                setattr(target, key, before)
                swept[f"{section}.{key}={value}"] = score(runs, bs, queries)
        finally:
            brain.close()
    progress(f"{bs.name}: {report.added} notes indexed in {synced - start:.1f} s")
    return {
        "kind": bs.kind,
        "notes": report.added,
        "queries": len(queries),
        "index_s": round(synced - start, 2),
        "search_ms_mean": round(1000 * (searched - synced) / max(1, len(queries)), 2),
        "note_languages": languages,
        "fts": score(ranked, bs, queries),
        "cutoffs": cutoffs,
        "sweep": swept,
        "per_query_ndcg@10": [
            round(ndcg_at_k(r, bs.qrels[qid], K), 4)
            for r, (qid, _) in zip(ranked, queries, strict=True)
        ],
    }


def sweep_markdown(sets: dict[str, dict]) -> str:
    """nDCG@10 per set and swept setting, with the worst case (min over sets of the change
    against the run's own settings)."""
    labels = list(next(iter(sets.values()))["sweep"])
    if not labels:
        return ""
    rows = []
    for label in labels:
        deltas = {n: r["sweep"][label]["ndcg@10"] - r["fts"]["ndcg@10"] for n, r in sets.items()}
        worst = min(deltas, key=deltas.get)
        rows.append(
            [label]
            + [r["sweep"][label]["ndcg@10"] for r in sets.values()]
            + [f"{deltas[worst]:+.3f} ({worst})"]
        )
    rows.append(["as run"] + [r["fts"]["ndcg@10"] for r in sets.values()] + [""])
    return markdown_table(["setting", *sets, "worst change"], rows)


def parse_sweep(items: list[str]) -> list[tuple[str, str, Any]]:
    """`section.key=v1,v2,...` -> [(section, key, v1), ...] (values parsed as TOML)."""
    out = []
    for item in items:
        key, _, raw = item.partition("=")
        for v in raw.split(","):
            for section, values in parse_overrides([f"{key}={v}"]).items():
                out += [(section, name, value) for name, value in values.items()]
    return out


def fts_only_markdown(sets: dict[str, dict]) -> str:
    rows = [
        [name, r["notes"], r["queries"], r["index_s"]] + [r["fts"][m] for m in METRICS]
        for name, r in sets.items()
    ]
    for kind in ("questions", "ir"):
        names = [n for n in sets if sets[n]["kind"] == kind]
        if names:
            rows.append(
                [f"mean {kind}", "", "", ""]
                + [sum(sets[n]["fts"][m] for n in names) / len(names) for m in METRICS]
            )
    table = markdown_table(["set", "notes", "queries", "index s", *METRICS], rows)
    cut_rows = [
        [name]
        + [
            f"-{c['relevant_dropped']}/{c['relevant_kept'] + c['relevant_dropped']}, "
            f"off {c['offtopic_answered']}/{c['offtopic']}"
            for c in r["cutoffs"].values()
        ]
        for name, r in sets.items()
    ]
    first = next(iter(sets.values()))["cutoffs"] if sets else {}
    cuts = markdown_table(["set", *(f"cut {t}" for t in first)], cut_rows)
    return (
        table + "\n\n**Cut-off, full text alone**: judged-relevant top-10 hits dropped, "
        "off-topic questions still answered\n\n" + cuts
    )


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
        for kind in ("questions", "ir"):
            names = [n for n in sets if sets[n]["kind"] == kind]
            if names:
                out[fusion.label][f"mean_ndcg@10_{kind}"] = sum(
                    sets[n]["modes"][fusion.label]["ndcg@10"] for n in names
                ) / len(names)
    return out


def targets(sets: dict[str, dict]) -> dict:
    """The issue-8 quality targets, checked against the default hybrid."""
    out: dict[str, Any] = {}
    for name, res in sets.items():
        m = res["modes"]
        hybrid = m["hybrid"]["ndcg@10"]
        best = max(m["fts"]["ndcg@10"], m["vector"]["ndcg@10"])
        if res["kind"] == "questions":
            floor = 0.50 if name == "cpp-docs" else 0.75
            out[f"hybrid {name} >= {floor:.2f}"] = {"value": hybrid, "met": hybrid >= floor}
            out[f"hybrid {name} >= best arm + 0.03"] = {
                "value": hybrid,
                "floor": best + 0.03,
                "met": hybrid >= best + 0.03,
            }
        else:
            out[f"hybrid {name} >= best arm - 0.01"] = {
                "value": hybrid,
                "floor": best - 0.01,
                "met": hybrid >= best - 0.01,
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
                    res["notes"],
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
                ["set", "notes", "queries", "fts", "vector", "hybrid", "hybrid − best arm"], rows
            )
        )
        parts.append("")
    names = list(sets)
    kinds = [k for k in ("questions", "ir") if any(sets[n]["kind"] == k for n in names)]
    rows = []
    for label, s in report["fusion_sweep"].items():
        rows.append(
            [label]
            + [sets[n]["modes"][label]["ndcg@10"] for n in names]
            + [s[f"mean_ndcg@10_{k}"] for k in kinds]
            + [f"{s['worst']:+.4f} ({s['worst_set']})"]
        )
    parts.append(
        "**Fusion sweep**: hybrid nDCG@10 per set; worst case = min over all sets of "
        "hybrid − max(fts, vector)\n"
    )
    parts.append(
        markdown_table(["fusion"] + names + [f"mean {k}" for k in kinds] + ["worst case"], rows)
    )
    parts.append(f"\nBest worst case: **{report['best_fusion']}**\n")
    rows = [[k, v["value"], "yes" if v["met"] else "**no**"] for k, v in report["targets"].items()]
    parts.append(markdown_table(["target", "value", "met"], rows))
    return "\n".join(parts)


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """`section.key=value` strings as load_settings overrides (values parsed as TOML)."""
    import tomllib

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, _, raw = item.partition("=")
        section, _, name = key.strip().partition(".")
        if not (section and name and _):
            raise SystemExit(f"--set wants section.key=value, got {item!r}")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out.setdefault(section, {})[name] = value
    return out


def expand_sets(spec: str) -> list[str]:
    names: list[str] = []
    for part in (s.strip() for s in spec.split(",")):
        if part:
            names += GROUPS.get(part, (part,))
    return list(dict.fromkeys(names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sets",
        default="all",
        help="comma-separated set names or groups: questions, ir, all (default)",
    )
    parser.add_argument("--limit-queries", type=int, default=None, help="first N judged queries")
    parser.add_argument("--model", default=None, help="model2vec folder (default: shared model)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a settings override for every brain (repeatable), e.g. text.languages=['de']",
    )
    parser.add_argument(
        "--fts-only", action="store_true", help="full text alone, no vectors (quick)"
    )
    parser.add_argument(
        "--fts-sweep",
        action="append",
        default=[],
        metavar="SECTION.KEY=V1,V2",
        help="with --fts-only: also run every value on the same index",
    )
    parser.add_argument("--json-out", default=None, help="also write the JSON report here")
    args = parser.parse_args(argv)

    from vault_brain.log import set_quiet

    set_quiet(True)
    names = expand_sets(args.sets)
    known = set(GROUPS["all"])
    unknown = sorted(set(names) - known)
    if unknown:
        parser.error(
            f"unknown sets: {', '.join(unknown)} (known: {', '.join(GROUPS['all'])}, "
            "or the groups questions, ir, all)"
        )
    extra = parse_overrides(args.overrides)
    model = bench_model() if args.model is None else args.model
    started = time.perf_counter()
    sets = {}
    if args.fts_only:
        sweep = parse_sweep(args.fts_sweep)
        for name in names:
            sets[name] = run_fts_only(bench_set(name), args.limit_queries, extra, sweep)
        print(fts_only_markdown(sets))
        if sweep:
            print()
            print(sweep_markdown(sets))
        report = {
            "bench": "quality --fts-only",
            "command": "python -m bench.quality " + " ".join(argv or sys.argv[1:]),
            **machine(),
            "overrides": extra,
            "seconds": round(time.perf_counter() - started, 1),
            "sets": sets,
        }
        print()
        print(write_json(report, args.json_out))
        return 0
    for name in names:
        sets[name] = run_set(bench_set(name), model, args.limit_queries, extra)
    sweep = sweep_summary(sets)
    report = {
        "bench": "quality",
        "command": "python -m bench.quality " + " ".join(argv or sys.argv[1:]),
        **machine(),
        "model": model or "bundled",
        "overrides": extra,
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
