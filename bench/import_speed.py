"""How long `vault-brain import` takes, and how much memory, as a person runs it: a ChatGPT
export of N generated conversations (10 messages each, ~13 KB of text each, mentioning
notes of the vault) into a copy of sample_vault, then the same export again (which must
write nothing). Whole processes, wall time and peak RSS.

    .venv/bin/python -m bench.import_speed [--conversations 500] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, code_commit, machine, markdown_table, progress, write_json
from tests.importers.exports import chatgpt_conversation
from tests.importers.exports import write_json as write_export


def export(path: Path, n: int) -> Path:
    turns = [
        ("user", "How does the restore drill for Tom Becker's Postgres Upgrade work? " * 5),
        ("assistant", "It restores the last full backup with pgBackRest, then checks it. " * 30),
    ] * 5
    convs = [
        chatgpt_conversation(f"conv-{i}", f"Chat {i} about the upgrade", turns, start=1.79e9 + i)
        for i in range(n)
    ]
    return write_export(path, convs)


def run(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, peak RSS of that child process in MB, the last line it printed)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "vault_brain", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"vault-brain {' '.join(args[:2])} failed")
    return seconds, usage.ru_maxrss // 1024, out.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["VAULT_BRAIN_EMBED_STRONG"] = "none"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        shutil.copytree(REPO / "sample_vault", vault)
        path = export(Path(tmp) / "conversations.json", args.conversations)
        run(["index", "--vault", str(vault)], env)
        for label in ("first import", "same export again"):
            progress(f"{label}: {args.conversations} conversations")
            seconds, mb, last = run(["import", "chatgpt", str(path), "--vault", str(vault)], env)
            rows.append(
                {"run": label, "seconds": round(seconds, 2), "peak_rss_mb": mb, "out": last}
            )
        size = path.stat().st_size
    result = {
        "bench": "import_speed",
        "commit": code_commit(),
        "machine": machine(),
        "conversations": args.conversations,
        "export_bytes": size,
        "runs": rows,
    }
    print(write_json(result, args.json_path))
    print()
    print(
        markdown_table(
            ["run", "seconds", "peak RSS (MB)", "says"],
            [[r["run"], r["seconds"], r["peak_rss_mb"], r["out"]] for r in rows],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
