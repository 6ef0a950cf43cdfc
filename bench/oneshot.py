"""One-shot CLI `search` (nothing running for the vault) beside qmd's, as whole processes:
wall time and CPU seconds (user + system, from each process's own rusage), medians of
`--rounds` alternated runs (each round runs every checkout's fts and hybrid search, then
qmd's, then the next round), on vaults indexed beforehand (a default `index`; qmd's
collection named after the vault's folder). CPU seconds are the steadier figure on a shared
machine; the load average is recorded after every round.

    .venv/bin/python -m bench.oneshot --vault /tmp/cpp --query "lambda capture by reference" \\
        [--code /tmp/old] [--qmd <qmd> --node-bin <node 22 bin folder>] [--rounds 5] \\
        [--cache-home DIR] [--json-out f]

`--code DIR` adds another checkout (a git worktree of an older commit), run with the same
Python and index, its built model files kept apart (`VAULT_BRAIN_EMBED_CACHE_DIR`), so two
codes that keep different graphs do not replace each other's. See bench/cli.py's docstring
for installing qmd.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, code_commit, machine, markdown_table, write_json  # noqa: E402


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one process."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv[:6])}: {err.read()[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--code", action="append", default=[], help="another checkout")
    parser.add_argument("--qmd", default=None, help="qmd's executable")
    parser.add_argument("--node-bin", default=None, help="the folder of Node 22 for qmd")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache-home", default=None, help="XDG_CACHE_HOME of the index")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    vault = str(Path(args.vault).resolve())
    base = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    if args.cache_home:
        base["XDG_CACHE_HOME"] = args.cache_home
    steps: list[tuple[str, list[str], dict[str, str], str]] = []
    for n, code in enumerate([REPO, *map(Path, args.code)]):
        env = {**base, "PYTHONPATH": str(code)}
        if n:
            env["VAULT_BRAIN_EMBED_CACHE_DIR"] = str(
                Path(tempfile.gettempdir()) / f"vb-oneshot-{n}"
            )
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "vault_brain")])
        label = "this checkout" if not n else f"code {code}"
        search = [sys.executable, "-m", "vault_brain", "search", args.query, "--json"]
        steps.append((f"{label}: hybrid", [*search, "--vault", vault], env, str(code)))
        fts = [*search, "--mode", "fts", "--vault", vault]
        steps.append((f"{label}: fts", fts, env, str(code)))
    if args.qmd:
        env = dict(os.environ)
        if args.node_bin:
            env["PATH"] = args.node_bin + os.pathsep + env["PATH"]
        qmd = [args.qmd, "search", args.query, "--json", "-c", Path(vault).name]
        steps.append(("qmd (full text, its one mode)", qmd, env, tempfile.gettempdir()))
    for _, cmd, env, cwd in steps:  # once each, untimed: caches warm, graphs kept
        timed(cmd, env, cwd)
    runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label, *_ in steps}
    loads = []
    for _ in range(args.rounds):
        for label, cmd, env, cwd in steps:
            runs[label].append(timed(cmd, env, cwd))
        loads.append(os.getloadavg()[0])
    qmd_wall = statistics.median(w for w, _, _ in runs[steps[-1][0]]) if args.qmd else None
    rows = []
    for label, values in runs.items():
        wall = statistics.median(w for w, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        rss = max(r for *_, r in values)
        ratio = round(wall / qmd_wall, 2) if qmd_wall else None
        rows.append(
            {
                "what": label,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "peak_rss_mb": round(rss),
                "wall_ratio_to_qmd": ratio,
            }
        )
    print(
        markdown_table(
            ["what", "wall s", "CPU s", "peak RSS MB", "wall ÷ qmd"],
            [
                [r["what"], r["wall_s"], r["cpu_s"], r["peak_rss_mb"], r["wall_ratio_to_qmd"]]
                for r in rows
            ],
        )
    )
    report = {
        "machine": machine(),
        "commit": code_commit(),
        "vault": vault,
        "query": args.query,
        "rounds": args.rounds,
        "load_average_1m": loads,
        "results": rows,
    }
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
