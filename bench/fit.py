"""The vault's calibration fit (search/fit.py) on a real index, old code against new (issue
23): CPU seconds a fit of each tier, the first in a fresh process (it loads the tier's
vectors into memory, as a fit does after the backlog wrote more) and a second one (the
vectors held), and whether both codes fit the same (a digest of the fit without its time).

Each run is a fresh process of one code (`--code DIR`: another checkout, run with this
Python), opening the index `--index` of the vault `--vault` without syncing it (nothing is
written: fit_tier is called, its fit is not stored); runs alternate between the codes.

    .venv/bin/python -m bench.fit --vault /tmp/lead/cpp-docs --cache-home /tmp/x/cache \\
        --index /tmp/x/cache/vault-brain/indexes/cpp-docs-…/index.db --code /tmp/old --rounds 5

The bank's vectors must be in the cache folder's model cache already (any earlier fit of
the same models put them there): a run that had to embed them would time the model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, machine, markdown_table, progress, write_json  # noqa: E402

CHILD = r"""
import hashlib, json, os, sys, time
from vault_brain.config import load_settings
from vault_brain.embed.cache import ModelCache
from vault_brain.search.fit import fit_tier
from vault_brain.service import Brain

vault, index = sys.argv[1], sys.argv[2]
settings = load_settings(vault=vault, env={}, overrides={"index": {"path": index}})
brain = Brain(settings, one_shot=False)
cache = ModelCache.under(settings.embed.cache_dir)
out = {}
for tier, embedder in (("instant", brain.embedder), ("strong", brain.strong)):
    for n in (1, 2):
        cpu, wall = time.process_time(), time.perf_counter()
        fit = fit_tier(brain.index, embedder, tier, cache)
        out[f"{tier}_{n}_cpu_s"] = round(time.process_time() - cpu, 4)
        out[f"{tier}_{n}_wall_s"] = round(time.perf_counter() - wall, 4)
    data = json.loads(fit.to_json())
    data.pop("fitted_at")
    out[f"{tier}_json"] = hashlib.sha256(json.dumps(data).encode()).hexdigest()[:12]
    exact = repr((fit.model, fit.notes, fit.coverage, sorted(fit.tops.items())))
    out[f"{tier}_exact"] = hashlib.sha256(exact.encode()).hexdigest()[:12]
    out[f"{tier}_floors"] = {lang: fit.floor(lang) for lang in sorted(fit.tops)}
brain.close()
print(json.dumps(out))
"""


def run(code: Path, vault: str, index: str, cache_home: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["PYTHONPATH"] = str(code)
    env["XDG_CACHE_HOME"] = cache_home
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, vault, index],
        env=env,
        cwd=code,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--index", required=True, help="the vault's index.db (a copy)")
    parser.add_argument("--cache-home", required=True, help="XDG_CACHE_HOME with the models")
    parser.add_argument("--code", help="the other checkout (before the change)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    codes = [("new", REPO)] + ([("old", Path(args.code).resolve())] if args.code else [])
    runs = []
    for r in range(args.rounds):
        for label, code in codes if r % 2 == 0 else codes[::-1]:
            result = run(code, args.vault, args.index, args.cache_home)
            result.update(code=label, round=r)
            progress(
                f"{label} {r}: "
                + json.dumps({k: v for k, v in result.items() if "floors" not in k})
            )
            runs.append(result)
    rows = []
    for label, _ in codes:
        mine = [x for x in runs if x["code"] == label]
        for tier in ("instant", "strong"):
            rows.append(
                (
                    label,
                    tier,
                    statistics.median(x[f"{tier}_1_cpu_s"] for x in mine),
                    statistics.median(x[f"{tier}_2_cpu_s"] for x in mine),
                    ", ".join(sorted({x[f"{tier}_exact"] for x in mine})),
                    ", ".join(sorted({x[f"{tier}_json"] for x in mine})),
                )
            )
    floors_equal = {
        tier: len({json.dumps(x[f"{tier}_floors"]) for x in runs}) == 1
        for tier in ("instant", "strong")
    }
    record = {"machine": machine(), "runs": runs, "floors_equal_across_codes": floors_equal}
    print(write_json(record, args.json_out))
    print(
        markdown_table(
            [
                "code",
                "tier",
                "first fit CPU-s (median)",
                "second fit CPU-s",
                "fit digest (exact floats)",
                "stored fit digest",
            ],
            rows,
        )
    )
    loads = ", ".join(f"{x['load']:.1f}" for x in runs)
    print(f"loads after each run: {loads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
