"""Wall time of one-shot CLI calls, as people and scripts make them (once per question).

Copies sample_vault into a temp folder, indexes it once, then times `vault-brain search`
(fts and hybrid), `get` and `--version` as separate processes, interleaved, N rounds each.
`--code DIR` times another checkout of vault-brain (e.g. an older commit in a git worktree)
with the same Python, so before and after are measured in one sitting.

    .venv/bin/python -m bench.cli_startup [--rounds 15] [--code /tmp/old] [--json-out f]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, machine, markdown_table, progress, write_json  # noqa: E402

CALLS = {
    "--version": ["--version"],
    "search --mode fts": ["search", "how do we deploy to production", "--mode", "fts"],
    "search (hybrid)": ["search", "how do we deploy to production"],
    "get": ["get", "How-to/Release checklist.md"],
}


def run_once(code: Path, args: list[str], vault: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["PYTHONPATH"] = str(code)
    full = [sys.executable, "-m", "vault_brain", *args]
    if args != ["--version"]:
        full += ["--vault", str(vault)]
    started = time.perf_counter()
    done = subprocess.run(full, env=env, capture_output=True, cwd=code, timeout=120)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--code", action="append", default=[], help="another checkout")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    codes = {"this checkout": REPO} | {f"code {c}": Path(c).resolve() for c in args.code}
    with tempfile.TemporaryDirectory(prefix="vb-cli-") as tmp:
        vaults = {}
        for label, code in codes.items():
            vault = Path(tmp) / f"vault-{len(vaults)}"
            shutil.copytree(
                REPO / "sample_vault", vault, ignore=shutil.ignore_patterns(".vault-brain")
            )
            run_once(code, ["index"], vault)
            for call in CALLS.values():  # warm the page cache and any compiled caches
                run_once(code, call, vault)
            vaults[label] = vault
        times: dict[tuple[str, str], list[float]] = {}
        for n in range(args.rounds):
            progress(f"round {n + 1}/{args.rounds}")
            for label, code in codes.items():
                for name, call in CALLS.items():
                    times.setdefault((label, name), []).append(run_once(code, call, vaults[label]))
    rows = []
    for (label, name), values in times.items():
        rows.append(
            [label, name, statistics.median(values), sorted(values)[int(0.9 * (len(values) - 1))]]
        )
    print(markdown_table(["code", "call", "median s", "p90 s"], rows))
    report = {
        "machine": machine(),
        "rounds": args.rounds,
        "results": [{"code": r[0], "call": r[1], "median_s": r[2], "p90_s": r[3]} for r in rows],
    }
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
