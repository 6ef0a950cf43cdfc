"""The refresh pass of a one-shot CLI search (no watcher: the stat pass that catches the
index up with the files before it answers), for two or more checkouts, in fresh processes
in alternated rounds:

1. the whole first search (`search --mode fts`, or `--mode hybrid`), beside qmd's `search`
   when given: wall time and CPU seconds (user + system of the process and the children it
   reaped: a query vector a checkout makes in a forked child is counted), and of it the
   process's own (without its children);
2. the pass alone in a process that has opened its Brain (`Brain.refresh_if_unwatched`) and
   its parts: the scan (vault/scan.py) in CPU ms, of it the kernel's (system time), the
   index's known rows read and compared.

Every process searches an unchanged vault (the common case); the answers of every checkout
are compared (the same bytes).

    .venv/bin/python -m bench.refresh --vault /tmp/x/cpp-docs --cache-home /tmp/x/home/cache \\
        --code base=/work/wt/x-base --code new=. [--mode fts|hybrid] [--rounds 15] \\
        [--qmd <qmd> --node-bin <node 22 bin> --qmd-env NAME=VALUE] [--json-out f]

Linux or macOS (wait4). CPU time is the steadier figure on a shared machine; the 1-minute
load average is recorded after every round.
"""

from __future__ import annotations

import argparse
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

QUERY = "lambda capture by reference"

# The CLI's own entry (the executable's), with the checkout on PYTHONPATH.
SEARCH = r"""
import sys
sys.argv = ["vault-brain", *sys.argv[1:]]
from vault_brain import entry
end = entry._end_now
def _end_now():  # this process's own CPU, without the children it reaped, on stderr
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    sys.stderr.write(f"SELF_CPU {r.ru_utime + r.ru_stime}\n")
    end()
entry._end_now = _end_now
getattr(entry, "command", entry.main)()
"""

# The pass alone, and its parts, in a process that opened its Brain first (JSON on stdout);
# the parts in a second Brain, whose reads do not find the rows the pass read remembered.
# The scan measured there is the process's second (its first is the pass's).
PASS = r"""
import gc, json, resource, sys, time
gc.disable()  # as a plain search runs (vault_brain/entry.py)
from vault_brain.cli_base import open_brain, settings_for
from vault_brain.vault.scan import scan_vault

def ru():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime

settings = settings_for(sys.argv[1], None)
v = settings.vault
out = {}
with open_brain(settings) as brain:
    (c0, s0), a = ru(), time.perf_counter()
    brain.refresh_if_unwatched(vectors=False)
    (c1, s1), b = ru(), time.perf_counter()
    out["pass_ms"], out["pass_cpu_ms"] = 1000 * (b - a), 1000 * (c1 - c0)
with open_brain(settings) as brain:  # another index connection: its rows not remembered
    (c0, s0) = ru()
    root, follow = settings.vault_path, v.follow_outside
    scan = scan_vault(root, v.ignore, v.max_file_bytes, follow_outside=follow)
    (c1, s1) = ru()
    out["scan_cpu_ms"], out["scan_sys_ms"] = 1000 * (c1 - c0), 1000 * (s1 - s0)
    rows = getattr(scan, "rows", None) or scan.files
    with brain.index.read() as r:
        c0, _ = ru()
        known = r.note_stats()
        c1, _ = ru()
        same = known == rows
        c2, _ = ru()
    out["known_rows_cpu_ms"], out["compare_cpu_ms"] = 1000 * (c1 - c0), 1000 * (c2 - c1)
    out["files"], out["unchanged"] = len(rows), same
print(json.dumps(out))
"""


def own_cpu(stderr: bytes) -> float:
    """The search process's own CPU s (SEARCH writes it), without its children's."""
    line = [x for x in stderr.decode().splitlines() if x.startswith("SELF_CPU ")][-1]
    return float(line.split()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--cache-home", required=True, help="XDG_CACHE_HOME of the index")
    parser.add_argument("--config-home", default=None)
    parser.add_argument("--code", action="append", required=True, help="LABEL=CHECKOUT")
    parser.add_argument("--mode", choices=("fts", "hybrid"), default="fts")
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--qmd", default=None, help="qmd's executable")
    parser.add_argument("--node-bin", default=None, help="the folder of Node 22 for qmd")
    parser.add_argument("--qmd-env", action="append", default=[], help="NAME=VALUE for qmd")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    vault = str(Path(args.vault).resolve())
    codes: dict[str, tuple[str, dict]] = {}
    for item in args.code:
        label, _, path = item.partition("=")
        code = str(Path(path).resolve())
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{code}/vault_brain"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VAULT_BRAIN_", "BENCH_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: from bytecode
        env.update(
            PYTHONPATH=code, XDG_CACHE_HOME=args.cache_home, VAULT_BRAIN_SEARCH_KEEP_WARM="0"
        )
        if args.config_home:
            env["XDG_CONFIG_HOME"] = args.config_home
        codes[label] = (code, env)
    words = ["search", args.query, "--json", "--vault", vault]
    if args.mode == "fts":
        words += ["--mode", "fts"]
    search = [sys.executable, "-c", SEARCH, *words]
    answers = {label: timed_process(search, env, code)[2] for label, (code, env) in codes.items()}
    same_answers = len(set(answers.values())) == 1

    qmd = None
    if args.qmd:
        qmd = qmd_search(args.qmd, args.query, vault, args.node_bin, args.qmd_env)
        timed_process(qmd[0], qmd[1], tempfile.gettempdir())
    runs: dict[str, list[tuple[float, float, float | None]]] = {}
    parts: dict[str, list[dict]] = {label: [] for label in codes}
    loads = []
    for round_ in range(args.rounds):
        order = list(codes.items())
        if round_ % 2:
            order.reverse()
        for label, (code, env) in order:
            wall, cpu, _, err = timed_process(search, env, code)
            runs.setdefault(f"{args.mode}: {label}", []).append((wall, cpu, own_cpu(err)))
        if qmd:
            wall, cpu, _, _ = timed_process(qmd[0], qmd[1], tempfile.gettempdir())
            runs.setdefault("qmd search", []).append((wall, cpu, None))
        for label, (code, env) in order:
            _, _, out, _ = timed_process([sys.executable, "-c", PASS, vault], env, code)
            parts[label].append(json.loads(out))
        loads.append(round(os.getloadavg()[0], 2))
    qmd_wall = statistics.median(w for w, _, _ in runs["qmd search"]) if qmd else None
    rows = []
    for what, values in runs.items():
        wall = statistics.median(w for w, _, _ in values)
        own = [o for _, _, o in values if o is not None]
        rows.append(
            {
                "what": what,
                "runs": len(values),
                "wall_ms": round(1000 * wall),
                "cpu_ms": round(1000 * statistics.median(c for _, c, _ in values)),
                "cpu_ms_min": round(1000 * min(c for _, c, _ in values)),
                "own_cpu_ms": round(1000 * statistics.median(own)) if own else None,
                "wall_ratio_to_qmd": round(wall / qmd_wall, 2) if qmd_wall else None,
            }
        )
    keys = (
        "pass_ms",
        "pass_cpu_ms",
        "scan_cpu_ms",
        "scan_sys_ms",
        "known_rows_cpu_ms",
        "compare_cpu_ms",
    )
    pass_rows = []
    for label, found in parts.items():
        pass_rows.append(
            {"code": label, **{k: round(statistics.median(p[k] for p in found), 1) for k in keys}}
        )
        pass_rows[-1]["files"] = found[0]["files"]
        pass_rows[-1]["unchanged"] = all(p["unchanged"] for p in found)
    print(
        markdown_table(
            [
                "first search (one-shot)",
                "runs",
                "wall ms",
                "CPU ms",
                "CPU ms (min)",
                "of it the process's own",
                "wall ÷ qmd",
            ],
            [list(r.values()) for r in rows],
        )
    )
    print()
    print(
        markdown_table(
            [
                "the pass alone (medians)",
                "wall ms",
                "CPU ms",
                "scan CPU ms",
                "of it kernel ms",
                "known rows CPU ms",
                "compare CPU ms",
                "files",
                "unchanged",
            ],
            [list(r.values()) for r in pass_rows],
        )
    )
    print(f"\nload average (1 min) after each round: {loads}")
    print("answers: " + ("the same bytes from every checkout" if same_answers else "DIFFER"))
    report = {
        "machine": machine(),
        "codes": {label: code for label, (code, _) in codes.items()},
        "vault": vault,
        "mode": args.mode,
        "query": args.query,
        "rounds": args.rounds,
        "load_average_1m": loads,
        "same_answers": same_answers,
        "results": rows,
        "pass": pass_rows,
    }
    print(write_json(report, args.json_out))
    return 0 if same_answers else 1


if __name__ == "__main__":
    sys.exit(main())
