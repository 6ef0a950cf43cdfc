"""The indexer process's storing of a cold index, alone (issue 23): the rows of every note
are prepared once, then each code stores them into a fresh index in a process of its own
(Syncer._apply with the prepared rows in place of the parse workers), alternated; its CPU
seconds (time.process_time: SQLite's statements, commits and checkpoints, the Python
around them) and the bytes it wrote (/proc/self/io wchar: WAL frames and checkpoints).

    .venv/bin/python -m bench.store_replay --vault cpp-docs --code /tmp/old --rounds 5

`--code DIR` is another checkout (the commit before a change), run with this Python and
the rows this checkout prepared; `--modes fts,instant` (instant: the static model's
vectors, made here once, stored with the notes as parse workers' vectors are). Each run's
index is kept until the round ends and compared with the old code's (bench/cold_index.py's
check): a difference makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
if __package__ in (None, ""):  # run as a script: `bench` importable, after PYTHONPATH's code
    sys.path.append(str(HERE.parents[1]))

MODEL = "local:minilm-static-256"  # the instant tier's bundled model


def prepare_rows(vault: Path, out: Path, vectors: bool) -> int:
    """Every note's Prepared (and its vectors with `vectors`), pickled into `out`."""
    from vault_brain.config import EmbedSettings, load_settings
    from vault_brain.index.prepare import prepare, with_vectors
    from vault_brain.vault.scan import scan_vault

    settings = load_settings(vault=str(vault), env={})
    items = [prepare(vault, s, None, settings, False) for s in scan_vault(vault).files]
    if vectors:
        from vault_brain.embed.local import LocalEmbedder

        embedder = LocalEmbedder(EmbedSettings(model=""))
        items = [
            p
            for at in range(0, len(items), 32)
            for p in with_vectors(items[at : at + 32], embedder)
        ]
    with out.open("wb") as f:
        pickle.dump(items, f, protocol=pickle.HIGHEST_PROTOCOL)
    return len(items)


def replay(rows: Path, vault: Path, db: Path, instant: bool) -> dict:
    """Store the pickled rows into a new index at `db` (run in the code under test)."""
    import time

    import vault_brain
    from vault_brain.config import load_settings
    from vault_brain.index.sqlite.db import SqliteIndex
    from vault_brain.index.sync import Syncer

    with rows.open("rb") as f:
        items = pickle.load(f)

    class Instant:  # what Syncer asks of the instant model when workers made its vectors
        name = MODEL
        worker_settings = True

    class Replay(Syncer):
        def _prepare_all(self, jobs):  # noqa: ANN001, ANN202
            yield from items

    index = SqliteIndex(db)
    syncer = Replay(
        index, load_settings(vault=str(vault), env={}), instant=Instant() if instant else None
    )
    io_before = _wchar()
    cpu = time.process_time()
    report = syncer._apply({p.stat.path: p.stat for p in items}, {}, [], False, None)
    index.close()  # its last checkpoint counted
    return {
        "cpu_s": round(time.process_time() - cpu, 3),
        "written_mb": round((_wchar() - io_before) / 1e6, 1),
        "notes": report.added,
        "vectors": report.vectors,
        "code": str(Path(vault_brain.__file__).resolve().parents[1]),
    }


def _wchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("wchar")).split()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="cpp-docs", help="sample | obsidian | cpp-docs")
    parser.add_argument("--path", type=Path, help="an unpacked vault folder to use instead")
    parser.add_argument("--code", type=Path, help="the old checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="fts,instant")
    parser.add_argument("--json-out")
    parser.add_argument("--replay", nargs=4, help=argparse.SUPPRESS)  # rows vault db mode
    args = parser.parse_args(argv)
    if args.replay:
        rows, vault, db, mode = args.replay
        print(json.dumps(replay(Path(rows), Path(vault), Path(db), mode == "instant")))
        return 0

    from bench.cli import copy_vault
    from bench.cold_index import compare
    from bench.common import REPO, machine, markdown_table, progress, write_json

    tmp = Path(tempfile.mkdtemp(prefix="vb-store-"))
    try:
        vault = args.path or copy_vault(args.vault, tmp / "vault")
        codes = {"new": REPO} if args.code is None else {"old": args.code.resolve(), "new": REPO}
        results: dict[str, dict[str, list[dict]]] = {}
        problems: dict[str, list[str]] = {}
        for mode in args.modes.split(","):
            rows = tmp / f"{mode}.pickle"
            progress(f"{mode}: preparing every note's rows")
            prepare_rows(vault, rows, mode == "instant")
            for n in range(args.rounds):
                built = {}
                for label, code in codes.items():
                    db = tmp / f"{mode}-{label}-{n}" / "index.db"
                    db.parent.mkdir()
                    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
                    env["PYTHONPATH"] = str(code)  # the vault_brain it stores with
                    env.pop("PYTHONDONTWRITEBYTECODE", None)
                    out = subprocess.run(
                        [
                            sys.executable,
                            str(HERE),
                            "--replay",
                            str(rows),
                            str(vault),
                            str(db),
                            mode,
                        ],
                        env=env,
                        cwd=tmp,
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    got = {**json.loads(out.strip().splitlines()[-1]), "load": os.getloadavg()[0]}
                    results.setdefault(mode, {}).setdefault(label, []).append(got)
                    progress(f"{mode} round {n + 1}/{args.rounds} {label}: {got}")
                    built[label] = db
                if n == 0 and len(built) == 2:
                    problems[mode] = compare(built["old"], built["new"])
                    progress(f"{mode}: identical" if not problems[mode] else f"{mode}: DIFFERENT")
                for db in built.values():
                    shutil.rmtree(db.parent, ignore_errors=True)
        summary = [
            {
                "mode": mode,
                "code": label,
                "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "written_mb": statistics.median(r["written_mb"] for r in runs),
                "loads": [round(r["load"], 1) for r in runs],
            }
            for mode, by_code in results.items()
            for label, runs in by_code.items()
        ]
        record = {
            "machine": machine(),
            "vault": args.vault if args.path is None else str(args.path),
            "rounds": args.rounds,
            "summary": summary,
            "runs": results,
            "identical": {m: not p for m, p in problems.items()},
            "differences": problems,
        }
        print(write_json(record, args.json_out))
        print()
        print(
            markdown_table(
                ["mode", "code", "CPU s (median)", "MB written (median)", "loads"],
                [
                    (
                        s["mode"],
                        s["code"],
                        s["cpu_s"],
                        s["written_mb"],
                        " ".join(map(str, s["loads"])),
                    )
                    for s in summary
                ],
            )
        )
        return 1 if any(problems.values()) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
