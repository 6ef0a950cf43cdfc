"""How long e5's light query encoder takes from `import` to the first query vector in a
fresh process, old code against new (issue 23, "The light encoder's start, round 8").

Each run is a new Python process that imports vault_brain and numpy, makes an E5Embedder on
a models folder of its own (its kept query files built by a first, untimed run) and embeds
one query with `embed_light_queries`, as a CLI search's forked child does; then a second
query (the encode alone, warm). CPU ms are split: numpy's import, e5's (and the
embedder's construction), `load_light` and the first vector (the tokenizer's first use,
tokens, encode). The code under test comes from PYTHONPATH (a worktree), so
A and B run alternated with the same interpreter and packages. Reported: medians of wall
and CPU ms (import → vector, and the part after numpy's import), of the warm encode, and
whether every run of both gave the same vector bits.

    .venv/bin/python -m bench.light_start --a /work/wt/base --b . --runs 21 \
        [--models-a DIR --models-b DIR] [--query TEXT] [--json-out f]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, median, write_json  # noqa: E402

SNIPPET = r"""
import time
w0, c0 = time.perf_counter(), time.process_time()
import hashlib, json, sys
from pathlib import Path
import vault_brain
import numpy
w1, c1 = time.perf_counter(), time.process_time()
from vault_brain.embed.cache import ModelCache
from vault_brain.embed.e5 import E5Embedder
e = E5Embedder(cache=ModelCache(Path(sys.argv[1])))
wi, ci = time.perf_counter(), time.process_time()
e.load_light()
wl, cl = time.perf_counter(), time.process_time()
v = e.embed_light_queries([sys.argv[2]])
w2, c2 = time.perf_counter(), time.process_time()
e.embed_light_queries([sys.argv[3]])
w3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({
    "wall": (w2 - w0) * 1e3, "cpu": (c2 - c0) * 1e3,
    "wall_after_numpy": (w2 - w1) * 1e3, "cpu_after_numpy": (c2 - c1) * 1e3,
    "numpy_cpu": (c1 - c0) * 1e3,
    "import_e5_cpu": (ci - c1) * 1e3, "load_light_cpu": (cl - ci) * 1e3,
    "first_vector_cpu": (c2 - cl) * 1e3,
    "warm_wall": (w3 - w2) * 1e3, "warm_cpu": (c3 - c2) * 1e3,
    "code": vault_brain.__file__, "digest": hashlib.sha256(v.tobytes()).hexdigest(),
}))
"""
FIGURES = (
    "wall",
    "cpu",
    "wall_after_numpy",
    "cpu_after_numpy",
    "numpy_cpu",
    "import_e5_cpu",
    "load_light_cpu",
    "first_vector_cpu",
    "warm_wall",
    "warm_cpu",
)


def run(tree: str, models: str, query: str, second: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()), PYTHONDONTWRITEBYTECODE="1")
    env.pop("OPENBLAS_NUM_THREADS", None)  # vault_brain sets it, as in a CLI search
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET, models, query, second],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(tree).resolve(),
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="worktree of the old code")
    parser.add_argument("--b", default=".", help="worktree of the new code")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--models-a", default=None)
    parser.add_argument("--models-b", default=None)
    parser.add_argument("--query", default="how do I sort a vector of structs by one field")
    parser.add_argument("--second", default="Wie synchronisiere ich meine Notizen?")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="light-start-"))
    trees = {"A": args.a, "B": args.b}
    models = {"A": args.models_a or str(scratch / "a"), "B": args.models_b or str(scratch / "b")}
    for side in trees:  # the kept files built (and stamped) first, untimed
        run(trees[side], models[side], args.query, args.second)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for i in range(args.runs):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            runs[side].append(run(trees[side], models[side], args.query, args.second))
    load = os.getloadavg()
    digests = {r["digest"] for side in runs.values() for r in side}
    result = {
        "machine": machine(),
        "load_after": load,
        "runs": args.runs,
        "query": args.query,
        "same_bits": len(digests) == 1,
        "code": {side: runs[side][0]["code"] for side in runs},
        "median": {s: {f: median([r[f] for r in runs[s]]) for f in FIGURES} for s in runs},
    }
    print(write_json(result, args.json_out))
    med = result["median"]
    print(
        markdown_table(
            ["figure (median ms)", "A (old)", "B (new)", "B / A"],
            [
                [f, f"{med['A'][f]:.1f}", f"{med['B'][f]:.1f}", f"{med['B'][f] / med['A'][f]:.2f}"]
                for f in FIGURES
            ],
        )
    )
    print(
        f"\nsame vector bits in all {2 * args.runs} runs: {result['same_bits']}; "
        f"load after: {load[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
