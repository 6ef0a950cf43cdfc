"""CLI `search` with no watch or serve running for the vault, beside qmd's, as whole
processes: wall time and CPU seconds (user + system, from each process's own rusage),
medians of `--rounds` alternated rounds, on vaults indexed beforehand (a default `index`;
qmd's collection named after the vault's folder). CPU seconds are the steadier figure on a
shared machine; the load average is recorded after every round.

A search that nothing answered leaves a warm resident (vault_brain/resident.py), so each
mode is measured twice per round: the **first search** (the bench asks any resident to
leave first: the search pays for everything in-process, then starts one) and, once that
resident has loaded its models, the **later searches** it answers (`--later` of them, each
timed). The resident's own RSS and the CPU seconds of its start (loading the index and the
query model, off the search's clock) are reported too. A round: hybrid first and later, fts
first and later, then qmd.

    .venv/bin/python -m bench.oneshot --vault /tmp/cpp --query "lambda capture by reference" \\
        [--qmd <qmd> --node-bin <node 22 bin folder> --qmd-env XDG_CACHE_HOME=...] \\
        [--rounds 5] [--later 3] [--cache-home DIR] [--json-out f]

Linux only (the resident's RSS and CPU come from /proc). See bench/cli.py's docstring for
installing qmd. (Comparing two checkouts' one-shot searches: `--code` was dropped with the
resident; run `VAULT_BRAIN_SEARCH_KEEP_WARM=0` searches of a worktree by hand.)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, code_commit, machine, markdown_table, qmd_search, write_json  # noqa: E402


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one process."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv[:6])}: {err.read()[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def ask(sock: Path, op: str) -> dict | None:
    """One request on the warm socket (vault_brain/warm.py's protocol), or None."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(str(sock))
            s.sendall(json.dumps({"v": 1, "op": op}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                more = s.recv(65536)
                if not more:
                    return None
                data += more
    except OSError:
        return None
    reply = json.loads(data)
    return reply if reply.get("ok") else None


def no_resident(sock: Path) -> None:
    """Ask the vault's resident to leave, and wait until its process is gone."""
    info = ask(sock, "info")
    if info is None:
        return
    pid = info["info"]["pid"]
    if info["info"]["kind"] != "resident":
        raise SystemExit(f"a {info['info']['kind']} (pid {pid}) runs for the vault: stop it")
    ask(sock, "leave")
    while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
        time.sleep(0.02)


def resident_ready(sock: Path) -> dict:
    """Wait until the resident the first search left has loaded its models; its info, with
    its RSS (MB) and the CPU seconds it has spent so far (its start)."""
    deadline = time.monotonic() + 300
    while True:
        reply = ask(sock, "info")
        if reply and reply["info"].get("ready"):
            info = reply["info"]
            break
        if time.monotonic() > deadline:
            raise SystemExit("no resident became ready in 300 s (search.keep_warm = 0?)")
        time.sleep(0.02)
    pid = info["pid"]
    info["cpu_s"] = cpu_of(pid)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            info["rss_mb"] = int(line.split()[1]) / 1024
    return info


def cpu_of(pid: int) -> float:
    """User + system CPU seconds a running process has spent."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def socket_of(vault: str, env: dict[str, str], code: Path) -> Path:
    """Where the warm socket of the vault is, as that checkout's code computes it."""
    script = (
        "from vault_brain.config import load_settings\n"
        "from vault_brain.warm import socket_paths\n"
        f"print(socket_paths(load_settings(vault={vault!r}))[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=str(code), capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr[-500:])
    return Path(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--qmd", default=None, help="qmd's executable")
    parser.add_argument("--node-bin", default=None, help="the folder of Node 22 for qmd")
    parser.add_argument("--qmd-env", action="append", default=[], help="NAME=VALUE for qmd")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--later", type=int, default=3, help="later searches per round")
    parser.add_argument("--cache-home", default=None, help="XDG_CACHE_HOME of the index")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    vault = str(Path(args.vault).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    if args.cache_home:
        env["XDG_CACHE_HOME"] = args.cache_home
    env["PYTHONPATH"] = str(REPO)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "vault_brain")])
    sock = socket_of(vault, env, REPO)
    search = [sys.executable, "-m", "vault_brain", "search", args.query, "--json"]
    modes = {
        "hybrid": [*search, "--vault", vault],
        "fts": [*search, "--mode", "fts", "--vault", vault],
    }
    qmd = None
    if args.qmd:
        qmd = qmd_search(args.qmd, args.query, vault, args.node_bin, args.qmd_env)
    # Once each, untimed: the page cache warm, model graphs built.
    for cmd in modes.values():
        no_resident(sock)
        timed(cmd, env, str(REPO))
    if qmd:
        timed(qmd[0], qmd[1], tempfile.gettempdir())
    runs: dict[str, list[tuple[float, float, float]]] = {}
    residents: list[dict] = []
    answers: dict[str, list[float]] = {}  # the resident's CPU seconds per answer, per mode
    loads = []
    for _ in range(args.rounds):
        for mode, cmd in modes.items():
            no_resident(sock)
            first = f"{mode}: first search (in-process, then starts the resident)"
            runs.setdefault(first, []).append(timed(cmd, env, str(REPO)))
            resident = resident_ready(sock)
            residents.append(resident)
            later = f"{mode}: later searches (the resident answers)"
            for _ in range(args.later):
                runs.setdefault(later, []).append(timed(cmd, env, str(REPO)))
            spent = cpu_of(resident["pid"]) - resident["cpu_s"]
            answers.setdefault(mode, []).append(spent / args.later)
        if qmd:
            label = "qmd search (full text, its one mode)"
            runs.setdefault(label, []).append(timed(qmd[0], qmd[1], tempfile.gettempdir()))
        loads.append(os.getloadavg()[0])
    no_resident(sock)
    qmd_wall = statistics.median(w for w, _, _ in runs[label]) if qmd else None
    rows = []
    for what, values in runs.items():
        wall = statistics.median(w for w, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        rss = max(r for *_, r in values)
        ratio = round(wall / qmd_wall, 2) if qmd_wall else None
        rows.append(
            {
                "what": what,
                "runs": len(values),
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "peak_rss_mb": round(rss),
                "wall_ratio_to_qmd": ratio,
            }
        )
    resident = {
        "answer_cpu_s_median": {m: round(statistics.median(v), 3) for m, v in answers.items()},
        "rss_mb_median": round(statistics.median(r["rss_mb"] for r in residents)),
        "rss_mb_max": round(max(r["rss_mb"] for r in residents)),
        "start_cpu_s_median": round(statistics.median(r["cpu_s"] for r in residents), 3),
    }
    print(
        markdown_table(
            ["what", "runs", "wall s", "CPU s", "peak RSS MB", "wall ÷ qmd"],
            [
                [
                    r["what"],
                    r["runs"],
                    r["wall_s"],
                    r["cpu_s"],
                    r["peak_rss_mb"],
                    r["wall_ratio_to_qmd"],
                ]
                for r in rows
            ],
        )
    )
    print(
        f"the resident: RSS {resident['rss_mb_median']} MB (max {resident['rss_mb_max']}), "
        f"{resident['start_cpu_s_median']} CPU s to start (median of {len(residents)}); "
        "CPU s per answer (its stat pass and search, beside the CLI's own): "
        + ", ".join(f"{m} {v}" for m, v in resident["answer_cpu_s_median"].items())
    )
    report = {
        "machine": machine(),
        "commit": code_commit(),
        "vault": vault,
        "query": args.query,
        "rounds": args.rounds,
        "later_per_round": args.later,
        "load_average_1m": loads,
        "results": rows,
        "resident": resident,
    }
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
