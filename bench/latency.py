"""Live-sync benchmark on cpp-docs (~9,700 notes): save → searchable, idle CPU, a burst.

`vault-brain watch` runs as its own process on a fresh copy of the corpus, the way a person
runs it next to Obsidian; this process plays the MCP client with a reader Brain on the same
index. Measured:

- save → findable by `fts` search: a note gets a new unique word appended (a normal write);
  the time from the file being closed to a search returning that note. p50/p95 over
  `--edits` edits (default 200), debounce included.
- watcher CPU while idle: CPU time of the watcher's process group over `--idle-seconds`
  (default 60), from /proc/<pid>/task/*/schedstat, as % of one core.
- a 1,000-file burst (a git checkout): files written into new folders, then the time until
  every one is indexed; then the folders are removed and the time until all are gone.

    .venv/bin/python -m bench.latency [--edits 200] [--idle-seconds 60] [--burst 1000] [--poll]

Prints JSON on stdout, then a Markdown table (progress goes to stderr). Embeddings are off
(`embed.provider = none`): the full-text path is what must be fast; vectors catch up later.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, percentile, progress, shared_dir  # noqa: E402

TARGETS = {"p50_s": 0.5, "p95_s": 1.0, "idle_cpu_pct": 1.0, "burst_settle_s": 10.0}


def unpack(into: Path) -> Path:
    archive = shared_dir() / "corpora" / "cpp-docs.tar.gz"
    if not archive.is_file():
        sys.exit(f"corpus not found: {archive} (set VAULT_BRAIN_SHARED)")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "cpp-docs"


def watcher_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["VAULT_BRAIN_EMBED_PROVIDER"] = "none"
    return env


def group_cpu_seconds(pgid: int) -> float:
    """CPU time of every live process in the group (the watcher and any workers).

    Summed over each thread's /proc/<pid>/task/<tid>/schedstat (nanoseconds), since the
    clock-tick counters of /proc/<pid>/stat are too coarse for an idle process.
    """
    total_ns = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[2]) != pgid:  # field 5: pgrp
                continue
            for task in os.listdir(f"/proc/{entry}/task"):
                total_ns += int(Path(f"/proc/{entry}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue
    return total_ns / 1e9


def wait_for_log(log_path: Path, event: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event:
                return record
        time.sleep(0.1)
    sys.exit(f"watcher never logged {event}; see {log_path}")


def found(brain: Any, word: str, path: str) -> bool:
    return any(h.path == path for h in brain.search(word, mode="fts", limit=3).hits)


def measure_edits(brain: Any, vault: Path, count: int, rng: random.Random) -> list[float]:
    notes = sorted(p for p in vault.rglob("*.md") if ".vault-brain" not in p.parts)
    latencies = []
    for n, path in enumerate(rng.sample(notes, count)):
        rel = path.relative_to(vault).as_posix()
        word = f"vbedit{n:04d}q{rng.randrange(10**6):06d}"
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"\n\nEdited while watching: {word}\n")
        written = time.perf_counter()
        while not found(brain, word, rel):
            if time.perf_counter() - written > 10:
                progress(f"edit {n} not findable after 10 s")
                break
            time.sleep(0.005)
        latencies.append(time.perf_counter() - written)
        time.sleep(rng.uniform(0.05, 0.15))  # people do not save 200 notes at once
        if (n + 1) % 50 == 0:
            progress(f"  {n + 1}/{count} edits")
    return latencies


def measure_burst(brain: Any, vault: Path, count: int) -> dict[str, float]:
    base = brain.status().notes
    started = time.perf_counter()
    for n in range(count):
        folder = vault / "burst" / f"part{n % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Checked out {n}.md").write_text(
            f"# Checked out {n}\n\nA file from a branch, token vbburst{n:05d}.\n", encoding="utf-8"
        )
    written = time.perf_counter()
    last = f"burst/part{(count - 1) % 10}/Checked out {count - 1}.md"
    while brain.status().notes < base + count or not found(brain, f"vbburst{count - 1:05d}", last):
        if time.perf_counter() - written > 120:
            sys.exit("burst never settled")
        time.sleep(0.02)
    settled = time.perf_counter()
    shutil.rmtree(vault / "burst")
    removed_at = time.perf_counter()
    while brain.status().notes > base:
        if time.perf_counter() - removed_at > 120:
            sys.exit("burst removal never settled")
        time.sleep(0.02)
    gone = time.perf_counter()
    return {
        "burst_write_s": written - started,
        "burst_settle_s": settled - written,
        "burst_total_s": settled - started,
        "burst_remove_settle_s": gone - removed_at,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="vb-latency-"))
    out: dict[str, Any] = {
        "machine": machine(),
        "poll": args.poll,
        "edits": args.edits,
        "burst": args.burst,
    }
    watcher = None
    try:
        vault = unpack(tmp)
        notes = sum(1 for _ in vault.rglob("*.md"))
        out["notes"] = notes
        progress(f"cpp-docs unpacked: {notes} notes; starting vault-brain watch")
        log_path = tmp / "watch.log"
        cmd = [sys.executable, "-m", "vault_brain", "watch", "--vault", str(vault)]
        if args.poll:
            cmd.append("--poll")
        with log_path.open("w") as log_file:
            started = time.perf_counter()
            watcher = subprocess.Popen(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                env=watcher_env(),
                start_new_session=True,
            )
        record = wait_for_log(log_path, "watch_reconcile", timeout=600)
        out["initial_reconcile_s"] = time.perf_counter() - started
        out["initial_reconcile_sync_ms"] = record.get("ms")

        no_vectors = {"embed": {"provider": "none"}}
        settings = load_settings(vault=str(vault), env={}, overrides=no_vectors)
        with Brain(settings) as brain:
            time.sleep(2)  # let the watcher finish its start-up
            progress(f"measuring {args.edits} edits")
            latencies = measure_edits(brain, vault, args.edits, rng)
            out["p50_s"] = percentile(latencies, 50)
            out["p95_s"] = percentile(latencies, 95)
            out["max_s"] = max(latencies)

            progress(f"measuring idle CPU for {args.idle_seconds} s")
            time.sleep(2)
            cpu0, t0 = group_cpu_seconds(watcher.pid), time.perf_counter()
            time.sleep(args.idle_seconds)
            cpu1, t1 = group_cpu_seconds(watcher.pid), time.perf_counter()
            out["idle_seconds"] = t1 - t0
            out["idle_cpu_s"] = cpu1 - cpu0
            out["idle_cpu_pct"] = 100.0 * (cpu1 - cpu0) / (t1 - t0)

            progress(f"measuring a {args.burst}-file burst")
            out.update(measure_burst(brain, vault, args.burst))
        watcher.send_signal(signal.SIGTERM)
        out["stop_exit_code"] = watcher.wait(60)
    finally:
        if watcher is not None and watcher.poll() is None:
            os.killpg(watcher.pid, signal.SIGKILL)
            watcher.wait()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def table(out: dict[str, Any]) -> str:
    mode = "polling" if out["poll"] else "native events"
    burst = f"{out['burst']:,}"
    rows = [
        ("save → findable p50 (s)", out["p50_s"], f"≤ {TARGETS['p50_s']}"),
        ("save → findable p95 (s)", out["p95_s"], f"≤ {TARGETS['p95_s']}"),
        ("save → findable max (s)", out["max_s"], ""),
        (f"idle CPU over {out['idle_seconds']:.0f} s (% of one core)", out["idle_cpu_pct"], "≤ 1"),
        (f"{burst}-file burst: settled after last write (s)", out["burst_settle_s"], "≤ 10"),
        (f"{burst}-file burst: first write → settled (s)", out["burst_total_s"], ""),
        ("burst folders removed: settled (s)", out["burst_remove_settle_s"], ""),
        ("initial reconcile, process start → done (s)", out["initial_reconcile_s"], ""),
    ]
    title = f"Live sync on cpp-docs ({out['notes']} notes, {mode}, {out['edits']} edits)"
    return f"**{title}**\n\n" + markdown_table(("measure", "value", "target"), rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--poll", action="store_true", help="run the watcher with --poll")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the temp vault and log")
    args = parser.parse_args(argv)
    out = run(args)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    print()
    print(table(out))


if __name__ == "__main__":
    main()
