"""The first one-shot CLI search (nothing running for the vault: no watcher, no server, no
resident yet), full text and hybrid, for two or more checkouts beside qmd's `search`, as
whole processes in alternated rounds: wall time and CPU seconds (user + system, from each
process's own rusage), medians.

Each checkout runs with its own models folder (`<cache-home>/bench-models-<label>`, so two
codes that keep different e5 graphs do not replace each other's at every alternation) and
its own `XDG_CACHE_HOME` when given (`--code LABEL=CHECKOUT[:CACHE_HOME]`: an index copy of
its own, e.g. when one code adds an SQL index the other would use too).
`VAULT_BRAIN_SEARCH_KEEP_WARM=0`: every search is a first one and starts no resident.

A checkout that has `vault_brain.search.semantic.spare_core` (the query model loaded on a
second core beside the stat pass, when one looks spare) is run twice a round with
`--both-ways`: once told a core is spare and once told none is, whatever the load average
says (the probe replaces `spare_core` in that process only).

Before the rounds, `search --json --explain` (raw scores included) of every checkout (and
way) is hashed for each query of QUERIES (English, German, Spanish, French, Japanese,
Russian; an error code, a compiler flag) in both modes: the answers must be the same bytes.
With `--other-vectors` (codes whose query vectors differ by design, e.g. another encoder's
rounding: e5's C encoder against numpy's), differing answers are reported, not failed: for
each, how many of the first runner's top 10 paths each other runner has, and whether in the
same order.

    .venv/bin/python -m bench.first_search --vault /tmp/cpp-docs \\
        --code base=/work/wt/x-base:/tmp/x/home-base/cache --code new=.:/tmp/x/home/cache \\
        [--config-home DIR] [--qmd <qmd> --node-bin <node 22 bin> --qmd-env NAME=VALUE] \\
        [--both-ways] [--rounds 7] [--json-out f]

Linux or macOS (wait4). CPU time is the steadier figure on a shared machine; the 1-minute
load average is recorded after every round.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, qmd_search, timed_process, write_json  # noqa: E402

QUERIES = (
    "lambda capture by reference",
    "how to declare a virtual destructor",
    "std::vector reserve vs resize",
    "Ausnahmebehandlung in C++",
    "cómo usar punteros inteligentes",
    "gestion des exceptions en C++",
    "スマートポインタの使い方",
    "умные указатели",
    "C4996 deprecated function warning",
    "compile with /EHsc",
)

# The CLI's own entry, in a process that may be told whether a core is spare (BENCH_SPARE_CORE).
PROBE = r"""
import os, sys
import vault_brain
spare = os.environ.get("BENCH_SPARE_CORE")
if spare is not None:
    from vault_brain.search import semantic
    semantic.spare_core = (lambda: True) if spare == "1" else (lambda: False)
sys.argv = ["vault-brain", *sys.argv[1:]]
from vault_brain import entry
getattr(entry, "command", entry.main)()  # the executable's own entry, where a checkout has it
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--query", default=QUERIES[0], help="the timed query")
    parser.add_argument(
        "--code", action="append", required=True, help="LABEL=CHECKOUT[:CACHE_HOME]"
    )
    parser.add_argument("--cache-home", default=None, help="XDG_CACHE_HOME of the index")
    parser.add_argument("--config-home", default=None)
    parser.add_argument("--qmd", default=None, help="qmd's executable")
    parser.add_argument("--node-bin", default=None, help="the folder of Node 22 for qmd")
    parser.add_argument("--qmd-env", action="append", default=[], help="NAME=VALUE for qmd")
    parser.add_argument("--both-ways", action="store_true", help="spare core told yes and no")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--other-vectors", action="store_true", help="report differing answers' top-10 overlap"
    )
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    vault = str(Path(args.vault).resolve())
    runners: dict[str, tuple[str, dict]] = {}  # label -> (checkout, env)
    for item in args.code:
        label, _, rest = item.partition("=")
        path, _, cache_home = rest.partition(":")
        code = Path(path).resolve()
        cache_home = cache_home or args.cache_home
        if not cache_home:
            raise SystemExit(f"{label}: no cache home (--cache-home or LABEL=CHECKOUT:DIR)")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "vault_brain")])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VAULT_BRAIN_", "BENCH_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: from bytecode
        env.update(
            PYTHONPATH=str(code),
            XDG_CACHE_HOME=cache_home,
            VAULT_BRAIN_SEARCH_KEEP_WARM="0",
            VAULT_BRAIN_EMBED_CACHE_DIR=str(Path(cache_home) / f"bench-models-{label}"),
        )
        if args.config_home:
            env["XDG_CONFIG_HOME"] = args.config_home
        has_spare = (
            (code / "vault_brain" / "search" / "semantic.py").read_text().count("def spare_core")
        )
        if args.both_ways and has_spare:
            runners[f"{label}, a core spare"] = (str(code), dict(env, BENCH_SPARE_CORE="1"))
            runners[f"{label}, no core spare"] = (str(code), dict(env, BENCH_SPARE_CORE="0"))
        else:
            runners[label] = (str(code), env)
    python = [sys.executable, "-c", PROBE]
    modes = {"fts": ["--mode", "fts"], "hybrid": []}

    # Untimed: model files built, and the answers of every runner hashed.
    answers: dict[str, dict[str, str]] = {}
    tops: dict[str, dict[str, list[str]]] = {}  # the top 10 paths, by query and runner
    for label, (code, env) in runners.items():
        for query in QUERIES:
            for mode, flags in modes.items():
                words = ["search", query, "--json", "--explain", *flags, "--vault", vault]
                _, _, out, _ = timed_process([*python, *words], env, code)
                answers.setdefault(f"{mode}: {query}", {})[label] = hashlib.sha256(out).hexdigest()[
                    :16
                ]
                tops.setdefault(f"{mode}: {query}", {})[label] = _top_paths(out)
    differ = [key for key, by in answers.items() if len(set(by.values())) != 1]
    overlaps = {key: _overlaps(tops[key]) for key in differ}

    qmd = None
    if args.qmd:
        qmd = qmd_search(args.qmd, args.query, vault, args.node_bin, args.qmd_env)
        timed_process(qmd[0], qmd[1], tempfile.gettempdir())
    runs: dict[str, list[tuple[float, float]]] = {}
    loads = []
    for round_ in range(args.rounds):
        order = list(runners.items())
        if round_ % 2:
            order.reverse()
        for mode, flags in modes.items():
            for label, (code, env) in order:
                words = ["search", args.query, "--json", *flags, "--vault", vault]
                wall, cpu, _, _ = timed_process([*python, *words], env, code)
                runs.setdefault(f"{mode}: {label}", []).append((wall, cpu))
        if qmd:
            wall, cpu, _, _ = timed_process(qmd[0], qmd[1], tempfile.gettempdir())
            runs.setdefault("qmd search (full text, its one mode)", []).append((wall, cpu))
        loads.append(round(os.getloadavg()[0], 2))
    qmd_wall = (
        statistics.median(w for w, _ in runs["qmd search (full text, its one mode)"])
        if qmd
        else None
    )
    rows = []
    for what, values in runs.items():
        wall = statistics.median(w for w, _ in values)
        rows.append(
            {
                "what": what,
                "runs": len(values),
                "wall_s": round(wall, 3),
                "cpu_s": round(statistics.median(c for _, c in values), 3),
                "cpu_s_min": round(min(c for _, c in values), 3),
                "wall_ratio_to_qmd": round(wall / qmd_wall, 2) if qmd_wall else None,
            }
        )
    print(
        markdown_table(
            ["search, first (one-shot)", "runs", "wall s", "CPU s", "CPU s (min)", "wall ÷ qmd"],
            [list(r.values()) for r in rows],
        )
    )
    print(f"\nload average (1 min) after each round: {loads}")
    print(
        f"answers (search --json --explain, {len(answers)} query x mode, sha256): "
        + ("the same bytes from every runner" if not differ else f"DIFFER: {differ}")
    )
    for key, by in overlaps.items():
        print(f"  {key}: top 10 against the first runner's: {by}")
    report = {
        "machine": machine(),
        "codes": {label: code for label, (code, _) in runners.items()},
        "vault": vault,
        "query": args.query,
        "rounds": args.rounds,
        "load_average_1m": loads,
        "answers_sha256": answers,
        "same_answers": not differ,
        "top10_overlap_where_differ": overlaps,
        "results": rows,
    }
    print(write_json(report, args.json_out))
    return 0 if not differ or args.other_vectors else 1


def _top_paths(out: bytes) -> list[str]:
    try:
        return [r["path"] for r in json.loads(out)["results"][:10]]
    except (ValueError, KeyError, TypeError):
        return []


def _overlaps(by: dict[str, list[str]]) -> dict[str, str]:
    """Each runner after the first: "n/10" of the first's top 10 it has, ", same order"
    when its top 10 is the first's."""
    first, *others = by
    out = {}
    for label in others:
        shared = len(set(by[first]) & set(by[label]))
        same = ", same order" if by[first] == by[label] else ""
        out[label] = f"{shared}/{len(by[first])}{same}"
    return out


if __name__ == "__main__":
    sys.exit(main())
