"""Shared pieces of the benchmarks: where the corpora live, IR sets as notes, metrics, output.

Benchmarks are not tests: they measure the real pipeline (`vault_brain.service.Brain`) on
real corpora in temporary folders, and print JSON plus Markdown tables for
`docs/benchmarks.md`. Nothing here is cached in the repository.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

IR_SETS = ("scifact", "cranfield", "medline", "cacm", "cisi", "npl", "time")
# Natural-language question sets over real vaults (../shared/corpora/questions/README.md):
# set name -> question file.
QUESTION_SETS = {
    "cpp-docs": "cpp-docs-questions.tsv",
    "obsidian-de": "obsidian-help-questions-de.tsv",
    "obsidian-fr": "obsidian-help-questions-fr.tsv",
    "obsidian-es": "obsidian-help-questions-es.tsv",
    "obsidian-ja": "obsidian-help-questions-ja.tsv",
}


def shared_dir() -> Path:
    """`VAULT_BRAIN_SHARED`, else `../shared` beside the repository (as CI lays it out)."""
    env = os.environ.get("VAULT_BRAIN_SHARED")
    return Path(env).resolve() if env else (REPO / ".." / "shared").resolve()


def bench_model() -> str:
    """The shared test/bench model when present, else "" (the model bundled in the package)."""
    model = shared_dir() / "models" / "minilm-static-256"
    return str(model) if model.is_dir() else ""


# --- IR sets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class IRSet:
    name: str
    docs: list[Doc]
    queries: dict[str, str]  # judged queries only, in file order
    qrels: dict[str, dict[str, float]]  # query id -> {doc id: gain}, gains > 0 only
    graded: bool  # more than one distinct gain value


def load_qrels(path: Path) -> dict[str, dict[str, float]]:
    """BEIR qrels.tsv (header, then query-id, corpus-id, score); non-positive scores dropped."""
    qrels: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as fh:
        next(fh, None)
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            qid, did, score = parts[0], parts[1], float(parts[2])
            if score > 0:
                qrels.setdefault(qid, {})[did] = score
    return qrels


def load_ir_set(name: str, root: Path | None = None) -> IRSet:
    """Read a BEIR-style set; only queries that have judgments are kept (CISI, CACM, TIME)."""
    folder = (root or shared_dir() / "corpora") / name
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [
            Doc(str(r["_id"]), r.get("title") or "", r.get("text") or "")
            for r in map(json.loads, fh)
        ]
    qrels = load_qrels(folder / "qrels.tsv")
    queries: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                if str(record["_id"]) in qrels:
                    queries[str(record["_id"])] = record["text"]
    gains = {g for judged in qrels.values() for g in judged.values()}
    return IRSet(name, docs, queries, qrels, graded=len(gains) > 1)


def note_text(doc: Doc) -> str:
    """A doc as a note: the title as its `# ` heading (so it is the note title), then the text."""
    parts = []
    if doc.title.strip():
        parts.append(f"# {doc.title.strip()}")
    if doc.text.strip():
        parts.append(doc.text.strip())
    return "\n\n".join(parts) + "\n" if parts else ""


def write_vault(folder: Path, docs: Iterable[Doc]) -> int:
    """One `<id>.md` note per doc; returns how many were written."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for doc in docs:
        (folder / f"{doc.id}.md").write_text(note_text(doc), encoding="utf-8")
        count += 1
    return count


def doc_id_of(path: str) -> str:
    """Inverse of write_vault's naming: vault-relative "<id>.md" → id."""
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


# --- question sets over real vaults --------------------------------------------------------


@dataclass(frozen=True)
class QuestionSet:
    name: str
    archive: Path  # the corpus archive that holds the vault
    root: str  # the vault root inside the archive, e.g. "cpp-docs/docs"
    queries: dict[str, str]  # question id ("q1", ...) -> text, in file order
    qrels: dict[str, dict[str, float]]  # question id -> {NFC vault-relative path: gain}


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def load_question_set(name: str, root: Path | None = None) -> QuestionSet:
    """A question file: a comment line naming the vault root, then query<TAB>path:grade;...

    Gains are 2^grade - 1 (grade 2 -> 3, grade 1 -> 1), as the README suggests for nDCG."""
    corpora = root or shared_dir() / "corpora"
    path = corpora / "questions" / QUESTION_SETS[name]
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    vault_root = ""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("#"):
                if "vault =" in line:
                    vault_root = line.rsplit("vault =", 1)[1].strip()
                continue
            if not line.strip():
                continue
            query, judged = line.split("\t", 1)
            qid = f"q{len(queries) + 1}"
            queries[qid] = query.strip()
            gains: dict[str, float] = {}
            for item in judged.split(";"):
                if item.strip():
                    note, grade = item.strip().rsplit(":", 1)
                    gains[nfc(note)] = 2.0 ** int(grade) - 1
            qrels[qid] = gains
    if not vault_root:
        raise ValueError(f"{path}: no 'vault = ...' in its comment line")
    archive = corpora / (vault_root.split("/", 1)[0] + ".tar.gz")
    return QuestionSet(name, archive, vault_root, queries, qrels)


def unpack(archive: Path, prefix: str, into: Path) -> Path:
    """The members of `archive` under `prefix/`, extracted into `into`; returns that folder."""
    prefix = prefix.rstrip("/") + "/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(into, members=members, filter="data")
    return into / prefix


# --- metrics (one query; callers average) ---------------------------------------------------


def _unique(ranked: Sequence[str]) -> list[str]:
    """A doc counts once, at its best rank (as trec_eval treats duplicate retrievals)."""
    seen: set[str] = set()
    out = []
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def ndcg_at_k(ranked: Sequence[str], gains: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k with linear gains (graded where the qrels are) and log2(rank + 1) discount."""
    dcg = sum(
        gains.get(doc, 0.0) / math.log2(rank + 2) for rank, doc in enumerate(_unique(ranked)[:k])
    )
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], gains: Mapping[str, float], k: int = 10) -> float:
    """Share of the relevant docs found in the top k."""
    relevant = {doc for doc, g in gains.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_unique(ranked)[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], gains: Mapping[str, float], k: int = 10) -> float:
    """1 / rank of the first relevant doc in the top k, else 0."""
    for rank, doc in enumerate(_unique(ranked)[:k], start=1):
        if gains.get(doc, 0.0) > 0:
            return 1.0 / rank
    return 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default), without numpy."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# --- output ------------------------------------------------------------------------------


def code_commit() -> str | None:
    """The commit the measured code came from ("+dirty" when vault_brain/ has edits), or None
    when the code is not in a git checkout (e.g. a `git archive` snapshot)."""

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        commit = run("rev-parse", "--short", "HEAD")
        dirty = run("status", "--porcelain", "--", "vault_brain")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("VAULT_BRAIN_BENCH_COMMIT")
    return commit + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    """What the figures were measured on, for the record in docs/benchmarks.md."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": code_commit(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def timed_process(argv: list[str], env: dict, cwd: str | Path) -> tuple[float, float, bytes, bytes]:
    """(wall s, CPU s of the process and its reaped children, stdout, stderr) of one whole
    process; exits saying why when it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:6])} failed: {stderr[-800:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, stdout, stderr


def qmd_search(
    qmd: str, query: str, vault: str, node_bin: str | None, qmd_env: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """qmd's one-shot `search` of the collection named as the vault's folder: (argv, env),
    with Node 22 first on PATH and the NAME=VALUE pairs given for qmd."""
    env = dict(os.environ, **dict(kv.split("=", 1) for kv in qmd_env))
    if node_bin:
        env["PATH"] = node_bin + os.pathsep + env["PATH"]
    return [qmd, "search", query, "--json", "-c", Path(vault).name], env


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub Markdown table; floats get 3 decimals."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(data: Any, path: str | None) -> str:
    """Serialise once; also write to `path` when given. Returns the JSON text."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
    return text


def progress(message: str) -> None:
    """Bench progress on stderr, so stdout stays the JSON and the tables."""
    print(message, file=sys.stderr, flush=True)
