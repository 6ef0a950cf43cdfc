"""Do a one-shot search's answers change when its query vector comes from e5_query (numpy)
instead of the onnxruntime graph?

For each question set (cpp-docs, obsidian-de/fr/es/ja), the vault gets a default index
(`vault-brain index`: full text, instant vectors, e5 over every chunk) in this bench's own
cache home, unless one is given. Then every judged question is asked twice through the real
`Brain.search` of a one-shot Brain, hybrid with the default settings: once with the
light query encoder (`light_query=True`, what every CLI search asks) and once through the
graph (what an MCP search gets). Both read the index the same way, so only the query's
vector differs. Reported per set: the query vectors' cosine, nDCG@10 of each, how
often the top answer and the whole top 10 are the same, and how often the "nothing
relevant" cut-off decides differently (default min_score), on the judged questions and on
bench/offtopic.py's questions the vault cannot answer.

    .venv/bin/python -m bench.light_query [--sets cpp-docs,obsidian-de] \
        [--vault cpp-docs=/path --home cpp-docs=/xdg-cache-home --prefix cpp-docs=docs/] \
        [--work DIR] [--json-out f]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    QUESTION_SETS,
    load_question_set,
    machine,
    markdown_table,
    ndcg_at_k,
    nfc,
    unpack,
    write_json,
)
from bench.offtopic import NONSENSE, OFF_TOPIC  # noqa: E402

K = 10


def prepared(name: str, work: Path, vaults: dict[str, str], homes: dict[str, str]) -> tuple:
    """(vault folder, XDG cache home) of a set, indexed by the CLI when this bench made it."""
    qs = load_question_set(name)
    if name in vaults:
        return Path(vaults[name]), Path(homes[name])
    folder = work / name
    vault = folder / qs.root
    home = folder / "cache"
    if not vault.is_dir():
        unpack(qs.archive, qs.root, folder)
    env = dict(os.environ, XDG_CACHE_HOME=str(home), XDG_CONFIG_HOME=str(folder / "config"))
    subprocess.run(
        [sys.executable, "-m", "vault_brain", "index", "--vault", str(vault)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return vault, home


def one_set(name: str, vault: Path, home: Path, prefix: str = "") -> dict[str, Any]:
    """`prefix`: what the given vault's paths have before the set's (a parent folder)."""
    import numpy as np

    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    os.environ["XDG_CACHE_HOME"] = str(home)
    qs = load_question_set(name)
    settings = load_settings(
        vault=str(vault),
        env={"XDG_CACHE_HOME": str(home)},
        overrides={"index": {"fresh_read_seconds": 86400.0}},
    )
    brain = Brain(settings, one_shot=True)
    e5 = brain.strong
    bar = settings.search.min_score  # the default "nothing relevant" cut-off
    cosines, same_top, same_ten, cut_diff = [], 0, 0, 0
    ndcg: dict[bool, list[float]] = {True: [], False: []}
    empty = {True: 0, False: 0}
    score_gaps: list[float] = []
    try:
        for qid, text in qs.queries.items():
            a = e5.embed_light_queries([text])[0]  # type: ignore[union-attr]
            b = e5.embed_queries([text])[0]  # type: ignore[union-attr]
            cosines.append(float(a @ b))
            ranked, cut = {}, {}
            for light in (True, False):
                hits = brain.search(text, limit=K, min_score=0.0, light_query=light).hits
                ranked[light] = [(nfc(h.path.removeprefix(prefix)), h.score) for h in hits]
                ndcg[light].append(ndcg_at_k([p for p, _ in ranked[light]], qs.qrels[qid], K))
                # Under the default bar, an empty answer or not (what search's own cut keeps).
                cut[light] = any(h.score >= bar for h in hits)
                empty[light] += not cut[light]
            la, gr = ranked[True], ranked[False]
            same_top += bool(la and gr and la[0][0] == gr[0][0]) or (not la and not gr)
            same_ten += [p for p, _ in la] == [p for p, _ in gr]
            cut_diff += cut[True] != cut[False]
            scores_b = dict(gr)
            score_gaps += [abs(s - scores_b[p]) for p, s in la if p in scores_b]
        # Questions the vault cannot answer (bench/offtopic.py): cut to nothing, each way?
        language = name.rsplit("-", 1)[-1] if name.startswith("obsidian") else "en"
        off = [*NONSENSE, *OFF_TOPIC.get(language, OFF_TOPIC["en"])]
        off_cut = {True: 0, False: 0}
        off_diff = 0
        for text in off:
            kept = {
                light: bool(brain.search(text, limit=K, light_query=light).hits)
                for light in (True, False)
            }
            off_cut[True] += not kept[True]
            off_cut[False] += not kept[False]
            off_diff += kept[True] != kept[False]
    finally:
        brain.close()
    n = len(qs.queries)
    return {
        "set": name,
        "questions": n,
        "query_cosine_min": min(cosines),
        "query_cosine_median": float(np.median(cosines)),
        "ndcg10_light": float(np.mean(ndcg[True])),
        "ndcg10_graph": float(np.mean(ndcg[False])),
        "same_top1": same_top / n,
        "same_top10_order": same_ten / n,
        "cutoff_decides_differently": cut_diff,
        "nothing_relevant_light": empty[True],
        "nothing_relevant_graph": empty[False],
        "offtopic_questions": len(off),
        "offtopic_cut_light": off_cut[True],
        "offtopic_cut_graph": off_cut[False],
        "offtopic_decides_differently": off_diff,
        "score_gap_median": float(np.median(score_gaps)) if score_gaps else 0.0,
        "score_gap_max": max(score_gaps, default=0.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(QUESTION_SETS))
    parser.add_argument("--vault", action="append", default=[], help="SET=folder (indexed)")
    parser.add_argument("--home", action="append", default=[], help="SET=its XDG cache home")
    parser.add_argument("--prefix", action="append", default=[], help="SET=folder/ to strip")
    parser.add_argument("--work", default="/tmp/bench-light-query")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    vaults = dict(v.split("=", 1) for v in args.vault)
    homes = dict(v.split("=", 1) for v in args.home)
    prefixes = dict(v.split("=", 1) for v in args.prefix)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.sets.split(","):
        vault, home = prepared(name, work, vaults, homes)
        rows.append(one_set(name, vault, home, prefixes.get(name, "")))
        print(rows[-1], file=sys.stderr)
    report = {"machine": machine(), "sets": rows}
    print(write_json(report, args.json_out))
    print(
        markdown_table(
            [
                "set",
                "questions",
                "query cos min / median",
                "nDCG@10 light / graph",
                "same top 1",
                "same top 10",
                "cut-off differs",
                "nothing relevant light / graph",
                "off-topic cut light / graph (of n), differ",
                "score gap median / max",
            ],
            [
                [
                    r["set"],
                    r["questions"],
                    f"{r['query_cosine_min']:.5f} / {r['query_cosine_median']:.5f}",
                    f"{r['ndcg10_light']:.3f} / {r['ndcg10_graph']:.3f}",
                    f"{r['same_top1']:.0%}",
                    f"{r['same_top10_order']:.0%}",
                    r["cutoff_decides_differently"],
                    f"{r['nothing_relevant_light']} / {r['nothing_relevant_graph']}",
                    f"{r['offtopic_cut_light']} / {r['offtopic_cut_graph']} "
                    f"({r['offtopic_questions']}), {r['offtopic_decides_differently']}",
                    f"{r['score_gap_median']:.4f} / {r['score_gap_max']:.4f}",
                ]
                for r in rows
            ],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
