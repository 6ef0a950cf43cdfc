"""The first hybrid search of a one-shot CLI (nothing running for the vault, no resident
left behind), for two or more checkouts, as whole processes and component by component.

Per round, for each checkout in turn (alternated, fresh processes):

- `search QUERY --json` as a user runs it (`python -m vault_brain`, VAULT_BRAIN_SEARCH_
  KEEP_WARM=0 so every search is a first one): wall time and CPU seconds (user + system,
  from the process's own rusage);
- the same search in a probe process that times its parts in CPU-ms (process CPU time, all
  threads: the query is embedded on a pool thread while the main one waits): importing
  numpy and onnxruntime, reading the e5 weights file, opening the onnxruntime session, the
  query tokenizer's set-up and the query's tokens, the query's forward pass, the KNN over
  the e5 vectors, and the rest of the process.

Each checkout keeps its model files (the e5 graph) in a folder of its own
(`<cache-home>/bench-models-<i>`, embed.cache_dir), built before the rounds, so two codes
that keep different graphs do not replace each other's; the index is the one a default
`index` left in `--cache-home`. Before the rounds, `search --json --explain` (raw scores
included) of every checkout is compared: the answers must be the same bytes.

    .venv/bin/python -m bench.first_hybrid --vault /tmp/cpp2k --query "lambda capture" \\
        --code base=/work/wt/x-base --code new=. --cache-home /tmp/x/cache \\
        [--config-home DIR] [--rounds 9] [--json-out f]

Linux or macOS (wait4). CPU time is the steadier figure on a shared machine; the load
average is recorded after every round.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, timed_process, write_json  # noqa: E402

# Runs in the probe process (PYTHONPATH = the checkout): wraps the parts it times, then
# runs the CLI's own search. Each part's CPU-ms is summed over its calls; what a part
# calls that is itself a part is counted once, in the inner part.
PROBE = r"""
import json, sys, time
spent = {}
stack = []

def part(name, fn):
    def timed(*args, **kwargs):
        stack.append(0.0)
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            total = time.process_time() - started
            inner = stack.pop()
            spent[name] = spent.get(name, 0.0) + total - inner
            if stack:
                stack[-1] += total
    return timed

t0 = time.process_time()
import vault_brain  # its environment defaults (BLAS threads, telemetry), as the CLI has them
t1 = time.process_time()
import numpy
t2 = time.process_time()
import onnxruntime
t3 = time.process_time()
spent["import numpy"] = t2 - t1
spent["import onnxruntime"] = t3 - t2
from vault_brain.embed import e5, e5_tokenizer, e5_weights
from vault_brain.index.sqlite import store
e5_weights.E5Weights.__init__ = part("e5 weights file read", e5_weights.E5Weights.__init__)
onnxruntime.InferenceSession.__init__ = part(
    "onnxruntime session opened", onnxruntime.InferenceSession.__init__)
e5_tokenizer.UnigramEncoder.__init__ = part(
    "query tokenizer set-up", e5_tokenizer.UnigramEncoder.__init__)
e5_tokenizer.UnigramEncoder.encode = part("query tokens", e5_tokenizer.UnigramEncoder.encode)
e5.E5Embedder._forward = part("query forward pass", e5.E5Embedder._forward)
store.Reads.knn_vectors = part("KNN over the e5 vectors", store.Reads.knn_vectors)
sys.argv = ["vault-brain", "search", *json.loads(sys.argv[1])]
from vault_brain.entry import main
import io, contextlib
with contextlib.redirect_stdout(io.StringIO()):
    main()
whole = time.process_time() - t0
out = {k: round(v * 1000, 1) for k, v in spent.items()}
out["the rest (interpreter excluded)"] = round(whole * 1000 - sum(out.values()), 1)
print(json.dumps(out), file=sys.stderr)
"""


def environment(code: Path, cache_home: str, config_home: str | None, models: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: from bytecode
    env.update(
        PYTHONPATH=str(code),
        XDG_CACHE_HOME=cache_home,
        VAULT_BRAIN_SEARCH_KEEP_WARM="0",
        VAULT_BRAIN_EMBED_CACHE_DIR=str(models),
    )
    if config_home:
        env["XDG_CONFIG_HOME"] = config_home
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--code", action="append", required=True, help="LABEL=checkout")
    parser.add_argument("--cache-home", required=True, help="XDG_CACHE_HOME of the index")
    parser.add_argument("--config-home", default=None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    vault = str(Path(args.vault).resolve())
    codes = {}
    for i, item in enumerate(args.code):
        label, _, path = item.partition("=")
        code = Path(path).resolve()
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "vault_brain")])
        models = Path(args.cache_home) / f"bench-models-{i}"
        codes[label] = (code, environment(code, args.cache_home, args.config_home, models))
    words = [args.query, "--vault", vault, "--json"]
    search = [sys.executable, "-m", "vault_brain", "search", *words]
    # Untimed: each checkout's model files built, and its answer with raw scores kept.
    answers = {}
    for label, (code, env) in codes.items():
        _, _, answer, _ = timed_process([*search, "--explain"], env, code)
        answers[label] = hashlib.sha256(answer).hexdigest()[:16]
    same = len(set(answers.values())) == 1
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label in codes}
    parts: dict[str, list[dict]] = {label: [] for label in codes}
    loads = []
    for _ in range(args.rounds):
        for label, (code, env) in codes.items():
            wall, cpu, _, _ = timed_process(search, env, code)
            runs[label].append((wall, cpu))
            probe = [sys.executable, "-c", PROBE, json.dumps(words)]
            _, _, _, err = timed_process(probe, env, code)
            parts[label].append(json.loads(err.decode().strip().splitlines()[-1]))
        loads.append(os.getloadavg()[0])
    rows = []
    for label in codes:
        walls = [w for w, _ in runs[label]]
        cpus = [c for _, c in runs[label]]
        rows.append(
            {
                "code": label,
                "runs": len(walls),
                "wall_s_median": round(statistics.median(walls), 3),
                "cpu_s_median": round(statistics.median(cpus), 3),
                "cpu_s_min": round(min(cpus), 3),
            }
        )
    names = list(dict.fromkeys(k for label in codes for p in parts[label] for k in p))
    components = {
        name: {
            label: round(statistics.median(p.get(name, 0.0) for p in parts[label]), 1)
            for label in codes
        }
        for name in names
    }
    print(
        markdown_table(
            ["code", "runs", "wall s (median)", "CPU s (median)", "CPU s (min)"],
            [list(r.values()) for r in rows],
        )
    )
    print()
    print(
        markdown_table(
            ["CPU-ms (median)", *codes],
            [[name, *(components[name][label] for label in codes)] for name in names],
        )
    )
    print(f"\nanswers (search --json --explain, sha256): {answers}; same bytes: {same}")
    report = {
        "machine": machine(),
        "codes": {label: str(code) for label, (code, _) in codes.items()},
        "vault": vault,
        "query": args.query,
        "rounds": args.rounds,
        "load_average_1m": loads,
        "answers_sha256": answers,
        "same_answers": same,
        "results": rows,
        "components_cpu_ms": components,
    }
    print(write_json(report, args.json_out))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
