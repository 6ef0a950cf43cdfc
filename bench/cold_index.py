"""The cold `vault-brain index` of one vault, whole processes, old code against new (issue 23):
wall time, CPU seconds (the process and its parse workers), peak RSS, and whether the two
built the same index.

"The same index" is checked on the database files: every row of notes, chunks, tags,
aliases, links and the embedding cache, every vector of the instant tier (by chunk rowid),
and every term of both full-text tables with its position (fts5vocab `instance`: the
tables are contentless, so their analysed text is compared through the terms they hold).
A difference is printed table by table and makes the exit status 1.

    .venv/bin/python -m bench.cold_index --vault cpp-docs --code /tmp/old --rounds 3
    .venv/bin/python -m bench.cold_index --vault cpp-docs --notes 400 --code /tmp/old --rounds 1

`--code DIR` is another checkout (a git worktree of the commit before the change) run with
this Python; runs alternate between the two codes. `--modes fts,instant` chooses the
settings: `fts` is full text only (VAULT_BRAIN_EMBED_PROVIDER=none), `instant` the instant
vectors (VAULT_BRAIN_EMBED_STRONG=none). `--notes N` keeps the first N notes (by path).
`--qmd PATH` times qmd's `collection add` of the same vault in each round too (its one
mode, full text; Node >= 22 first on PATH, or `--node-bin`), for the ratio the issue sets.
"""

from __future__ import annotations

import argparse
import hashlib
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

from bench.cli import copy_vault, cpu_flags  # noqa: E402
from bench.common import REPO, machine, markdown_table, progress, write_json  # noqa: E402

MODES = {
    "fts": {"VAULT_BRAIN_EMBED_PROVIDER": "none"},
    "instant": {"VAULT_BRAIN_EMBED_STRONG": "none"},
}

# table -> the query that lists its content in a stable order
DUMPS = {
    "notes": "SELECT * FROM notes ORDER BY rowid",
    "chunks": "SELECT * FROM chunks ORDER BY rowid",
    "tags": "SELECT * FROM tags ORDER BY note_rowid, tag",
    "aliases": "SELECT * FROM aliases ORDER BY note_rowid, alias_key",
    "links": "SELECT * FROM links ORDER BY note_rowid, ordinal",
    "embed_cache": "SELECT model, text_hash, vector FROM embed_cache ORDER BY model, text_hash",
    "chunk_vectors": "SELECT rowid, embedding FROM chunk_vectors ORDER BY rowid",
    "chunks_fts terms": "SELECT * FROM temp.v_chunks ORDER BY doc, col, offset",
    "notes_fts terms": "SELECT * FROM temp.v_notes ORDER BY doc, col, offset",
    # the vault's calibration (search/fit.py), without the time it was made
    "calibration": "SELECT key, json_remove(value, '$.fitted_at') FROM meta "
    "WHERE key LIKE 'calibration:%' ORDER BY key",
}


def subset(vault: Path, notes: int) -> None:
    """Keep the first `notes` Markdown files (by path) of `vault`, remove the rest."""
    files = sorted(p for p in vault.rglob("*.md") if p.is_file())
    for path in files[notes:]:
        path.unlink()


def run_index(code: Path, vault: Path, home: Path, env_extra: dict[str, str]) -> dict:
    """One cold `index` in its own process; (wall, CPU of it and its workers, peak RSS)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(code)
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["XDG_CACHE_HOME"] = str(home / "cache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: from bytecode
    argv = [sys.executable, "-m", "vault_brain", "index", "--vault", str(vault), "--json"]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=err)
        # This child's own usage, its reaped parse workers included (wait4, not the running
        # maximum over every child that RUSAGE_CHILDREN keeps).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-1500:]
            raise RuntimeError(f"index failed ({proc.returncode}): {tail}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        # the largest of the processes (the indexer or one worker), as the kernel keeps it
        "peak_rss_mb": round(usage.ru_maxrss / 1024.0, 1),
        "load": os.getloadavg()[0],
    }


def run_qmd(qmd: str, node_bin: str | None, vault: Path, home: Path) -> dict:
    """qmd's cold `collection add` of the vault, timed as run_index times ours."""
    env = dict(os.environ)
    if node_bin:
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["XDG_CACHE_HOME"] = str(home / "cache")
    argv = [qmd, "collection", "add", str(vault), "--name", "bench"]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"qmd failed: {proc.stderr.read().decode(errors='replace')[-800:]}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024.0, 1),
        "load": os.getloadavg()[0],
    }


def index_file(home: Path) -> Path:
    found = list((home / "cache").rglob("index.db"))
    if len(found) != 1:
        raise RuntimeError(f"expected one index.db under {home}, found {found}")
    return found[0]


def dump(db: Path) -> dict[str, tuple[int, str, list]]:
    """table -> (rows, digest, the first rows) of everything the index holds."""
    from vault_brain.index.sqlite.db import _load_vec, pick_binding

    conn = pick_binding().connect(db)  # the binding the index uses: it loads sqlite-vec
    _load_vec(conn)
    conn.execute("CREATE VIRTUAL TABLE temp.v_chunks USING fts5vocab(main, chunks_fts, instance)")
    conn.execute("CREATE VIRTUAL TABLE temp.v_notes USING fts5vocab(main, notes_fts, instance)")
    out = {}
    for name, sql in DUMPS.items():
        try:
            rows = conn.execute(sql).fetchall()
        except Exception as exc:  # noqa: BLE001  # no such table: no vectors in this mode
            out[name] = (0, f"absent ({exc})", [])
            continue
        digest = hashlib.blake2b(repr(rows).encode("utf-8", "surrogatepass")).hexdigest()
        out[name] = (len(rows), digest, rows)
    conn.close()
    return out


def compare(a: Path, b: Path) -> list[str]:
    """What differs between two index files, table by table ([] when nothing does)."""
    da, db = dump(a), dump(b)
    problems = []
    for name in DUMPS:
        (na, ha, ra), (nb, hb, rb) = da[name], db[name]
        if ha == hb:
            continue
        if name == "calibration" and na == nb == 1:
            problems.append(
                f"calibration: the bank's best cosines differ by {_worst(ra, rb):.2g} at most"
            )
            continue
        first = next(
            (i for i, (x, y) in enumerate(zip(ra, rb, strict=False)) if x != y), min(na, nb)
        )
        show_a = repr(ra[first])[:300] if first < na else "-"
        show_b = repr(rb[first])[:300] if first < nb else "-"
        problems.append(
            f"{name}: {na} vs {nb} rows; first difference at row {first}: {show_a} | {show_b}"
        )
    return problems


def _worst(ra: list, rb: list) -> float:
    """The largest difference between two calibrations' cosines (same languages)."""
    import json

    a, b = json.loads(ra[0][1])["tops"], json.loads(rb[0][1])["tops"]
    if a.keys() != b.keys() or any(len(a[k]) != len(b[k]) for k in a):
        return float("inf")
    return max(abs(x - y) for k in a for x, y in zip(a[k], b[k], strict=True))


def counts(db: Path) -> dict[str, int]:
    return {name: n for name, (n, _, _) in dump(db).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="cpp-docs", help="sample | obsidian | cpp-docs")
    parser.add_argument("--notes", type=int, default=0, help="keep the first N notes (0: all)")
    parser.add_argument("--code", type=Path, help="the old checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="fts,instant")
    parser.add_argument("--no-compare", action="store_true", help="time only")
    parser.add_argument("--qmd", help="qmd's executable: its cold index in each round too")
    parser.add_argument("--node-bin", help="a folder with Node >= 22, put first on PATH")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="vb-cold-"))
    try:
        pristine = copy_vault(args.vault, tmp / "pristine")
        if args.notes:
            subset(pristine, args.notes)
        notes = sum(1 for _ in pristine.rglob("*.md"))
        codes = {"new": REPO}
        if args.code is not None:
            codes = {"old": args.code.resolve(), "new": REPO}
        results: dict[str, dict[str, list[dict]]] = {}
        problems: dict[str, list[str]] = {}
        for mode in args.modes.split(","):
            built: dict[str, Path] = {}
            for n in range(args.rounds):
                for label, code in codes.items():  # alternated: old, new, old, new ...
                    run = tmp / f"{mode}-{label}-{n}"
                    vault = run / "vault"
                    shutil.copytree(pristine, vault)
                    progress(f"{mode} round {n + 1}/{args.rounds}: {label}")
                    got = run_index(code, vault, run, MODES[mode])
                    results.setdefault(mode, {}).setdefault(label, []).append(got)
                    progress(f"  {got}")
                    if n == 0:
                        built[label] = index_file(run)
                    else:
                        shutil.rmtree(run, ignore_errors=True)
                if args.qmd:  # its one index, whatever our mode: timed in every mode's rounds
                    run = tmp / f"{mode}-qmd-{n}"
                    shutil.copytree(pristine, run / "vault")
                    progress(f"{mode} round {n + 1}/{args.rounds}: qmd")
                    got = run_qmd(args.qmd, args.node_bin, run / "vault", run)
                    results.setdefault(mode, {}).setdefault("qmd", []).append(got)
                    progress(f"  {got}")
                    shutil.rmtree(run, ignore_errors=True)
            if not args.no_compare and len(built) == 2:
                problems[mode] = compare(built["old"], built["new"])
                progress(f"{mode}: identical" if not problems[mode] else f"{mode}: DIFFERENT")
                for line in problems[mode]:
                    progress("  " + line)
            if built:
                progress(f"{mode} rows: {counts(next(iter(built.values())))}")
        summary = []
        for mode, by_code in results.items():
            for label, runs in by_code.items():
                summary.append(
                    {
                        "mode": mode,
                        "code": label,
                        "wall_s": statistics.median(r["wall_s"] for r in runs),
                        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                        "loads": [r["load"] for r in runs],
                    }
                )
        record = {
            "machine": {**machine(), "cpu_flags": cpu_flags()},
            "vault": args.vault,
            "notes": notes,
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
                ["mode", "code", "wall s (median)", "CPU s (median)", "peak RSS MB", "loads"],
                [
                    (
                        s["mode"],
                        s["code"],
                        s["wall_s"],
                        s["cpu_s"],
                        s["peak_rss_mb"],
                        " ".join(f"{x:.1f}" for x in s["loads"]),
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
