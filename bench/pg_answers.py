"""The answers of one code tree on a Postgres bench index, to compare two trees: every
cpp-docs question's top 10 (path and score) through `Brain.search`, per mode.

    python bench/pg_answers.py dump --tree DIR --url URL --schema S --out a.json [--modes hybrid]
    python bench/pg_answers.py compare a.json b.json

`--tree` is the checkout whose vault_brain answers (this one, or main's worktree).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def dump(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(Path(args.tree).resolve()))
    from bench.common import bench_model, load_question_set
    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    queries = list(load_question_set("cpp-docs").queries.values())
    sep = "&" if "?" in args.url else "?"
    settings = load_settings(
        vault=args.vault,
        env={},
        overrides={
            "embed": {"provider": "local", "model": bench_model(), "strong": "none"},
            "index": {"url": f"{args.url}{sep}schema={args.schema}", "fresh_read_seconds": 86400.0},
        },
    )
    out: dict = {"tree": args.tree, "schema": args.schema}
    with Brain(settings) as brain:
        for mode in args.modes.split(","):
            out[mode] = [
                [(h.path, round(h.score, 4)) for h in brain.search(q, mode=mode, limit=10).hits]
                for q in queries
            ]
    Path(args.out).write_text(json.dumps(out))
    return {"questions": len(queries)}


def compare(a_path: str, b_path: str) -> dict:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    out = {}
    for mode in [m for m in a if m not in ("tree", "schema") and m in b]:
        paths = sum(
            [p for p, _ in x] == [p for p, _ in y] for x, y in zip(a[mode], b[mode], strict=True)
        )
        scored = sum(x == y for x, y in zip(a[mode], b[mode], strict=True))
        out[mode] = {
            "questions": len(a[mode]),
            "same_top10_paths": paths,
            "same_top10_paths_and_scores": scored,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("dump", "compare"))
    parser.add_argument("files", nargs="*")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--url")
    parser.add_argument("--schema", default="bench_cpp")
    parser.add_argument("--vault", default="/tmp/pgscale/vault/cpp-docs")
    parser.add_argument("--modes", default="hybrid")
    parser.add_argument("--out")
    args = parser.parse_args()
    result = dump(args) if args.action == "dump" else compare(*args.files)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
