"""Which score should make `vault-brain import --merge` put a conversation into an existing
note? Measured on bench/merge_cases.py over sample_vault, with each vector tier.

For every labelled conversation the importer's own matcher (Importer.best_match: a hybrid
search with the title and first question, calibrated 0-1) names its best note and score.
For each threshold the run counts right decisions (merged into a note it belongs in, or
kept apart when it belongs nowhere), wrong merges (into the wrong note, or when it belongs
nowhere: the costly mistake, since it puts a chat into a person's note) and missed merges
(a note of its own where one existed: harmless, the person can move it).

    .venv/bin/python -m bench.import_merge [--tiers instant,e5] [--json out.json]

Prints JSON, then Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import REPO, code_commit, machine, markdown_table, progress, write_json
from bench.merge_cases import CASES
from vault_brain.config import load_settings
from vault_brain.importers.records import Conversation, Message
from vault_brain.importing import MERGE_THRESHOLD, Importer
from vault_brain.service import Brain

THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]


def scores(tier: str, vault: Path) -> list[dict[str, Any]]:
    embed = {"provider": "local", "strong": "e5" if tier == "e5" else "none"}
    settings = load_settings(vault=str(vault), env={}, overrides={"embed": embed})
    out = []
    with Brain(settings) as brain:
        brain.sync()
        while brain.embed_pending(limit=1024):
            pass
        if tier == "e5":
            status = brain.status()
            assert status.strong_pending == 0 and status.strong_vectors, "e5 did not cover"
        importer = Importer(settings, notes=list, search=brain.search, index=print)
        for i, (title, question, targets) in enumerate(CASES):
            conv = Conversation(
                "claude",
                f"case-{i}",
                title,
                None,
                None,
                (Message("user", question, None), Message("assistant", "…", None)),
                "bench",
            )
            candidate, score = importer.best_match(conv, title)
            out.append({"title": title, "targets": targets, "candidate": candidate, "score": score})
    return out


def sweep(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in THRESHOLDS:
        right = wrong = missed = 0
        for r in rows:
            merged = r["candidate"] is not None and r["score"] >= t
            if merged and r["candidate"] in r["targets"]:
                right += 1
            elif merged:
                wrong += 1
            elif r["targets"]:
                missed += 1
            else:
                right += 1
        out.append({"threshold": t, "right": right, "wrong_merges": wrong, "missed": missed})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiers", default="instant,e5")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "bench": "import_merge",
        "commit": code_commit(),
        "machine": machine(),
        "cases": len(CASES),
        "positives": sum(1 for c in CASES if c[2]),
        "threshold_in_code": MERGE_THRESHOLD,
        "tiers": {},
    }
    for tier in args.tiers.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp) / "vault"
            shutil.copytree(REPO / "sample_vault", vault)
            progress(f"{tier}: scoring {len(CASES)} conversations")
            rows = scores(tier, vault)
        result["tiers"][tier] = {"rows": rows, "sweep": sweep(rows)}
    print(write_json(result, args.json_path))
    for tier, data in result["tiers"].items():
        print(f"\n### {tier}\n")
        print(
            markdown_table(
                ["threshold", "right", "wrong merges", "missed merges"],
                [
                    [s["threshold"], s["right"], s["wrong_merges"], s["missed"]]
                    for s in data["sweep"]
                ],
            )
        )
        print()
        print(
            markdown_table(
                ["conversation", "belongs in", "best match", "score"],
                [
                    [
                        r["title"],
                        ", ".join(Path(t).stem for t in r["targets"]) or "(own note)",
                        Path(r["candidate"]).stem if r["candidate"] else "-",
                        f"{r['score']:.3f}",
                    ]
                    for r in sorted(data["rows"], key=lambda r: -r["score"])
                ],
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
