"""Growing a Postgres bench index fast, with the rows the port writes: for the 1M level,
which the port's own pace (~100 chunks/s on this project's 2 cores, one writer, every
index kept up to date) would take ~2 hours to reach.

What is the same as `bench/postgres.py`'s growth: the synthetic notes (one generator,
`synthetic_notes`, the same seed), and every row, written by the port's own `Writes`
(`upsert_note`, `store_vectors`, `flush`: the same SQL, the same word frequencies,
postings and impacts). What is not: the vault's transaction advisory lock is not taken
(a bench writing disjoint notes), several processes write at once, a transaction holds
1,000 notes instead of 200, commits are asynchronous, and the secondary indexes no
statement of the growth reads (GIN, the postings' impact order, HNSW, ...) are dropped
while it runs and built again after, by sorting (a bulk load's usual order). `check`
proves the rows equal: one small growth each way from one clone, every table compared.

    .venv/bin/python -m bench.pg_bulk clone --url URL --from bench_cpp --to bench_1m
    .venv/bin/python -m bench.pg_bulk grow --url URL --schema bench_1m --level 1m [--workers 3]
    .venv/bin/python -m bench.pg_bulk check --url URL --from bench_qcpp [--chunks 3000]
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import progress, write_json  # noqa: E402

NOTES_PER_BATCH = 200  # bench/postgres.py's transaction: the generator's unit
BATCHES_PER_TRANSACTION = 5
# Indexes the growth's statements never read (upsert_note finds a note by path, the
# vectors find their chunks by note, ON CONFLICT needs its keys, foreign keys their
# targets): dropped while it runs, built again after.
DROPPED = (
    "notes_tsv",
    "chunks_tsv",
    "note_postings_impact",
    "note_postings_pkey",
    "chunks_pending",
    "chunks_strong_pending",
    "vectors_instant_hnsw",
    "vectors_instant_note",
    "notes_sort",
    "notes_folder",
    "notes_stem",
    "notes_by_path_key",
    "notes_body_hash",
    "notes_claimed",
    "notes_lang",
    "notes_title",
    "notes_lower_path",
)


def connect(url: str, schema: str, vectors: bool = True) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f'SET search_path = "{schema}", public')
    if vectors:
        register_vector(conn)
    return conn


def synthetic_notes(pool: list[Any], rng: random.Random, n: int) -> Iterator[tuple]:
    """Synthetic notes after the n-th, endlessly: (NoteRow, ChunkRows, vectors). Each of
    3-4 chunks joins the first half of one real chunk and the second half of another, its
    vector the normalised sum of theirs."""
    import numpy as np

    from vault_brain.index.records import ChunkRow, NoteRow

    while True:
        n += 1
        parts = []
        for o in range(rng.choice((3, 4))):
            a, b = rng.sample(pool, 2)
            text = a.first + " " + b.second
            va = a.vector + b.vector
            vec = (va / (np.linalg.norm(va) or 1.0)).astype(np.float32).tobytes()
            th = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
            parts.append((o, a, b, text, th, vec))
        title = f"Synthetic {n}"
        title_fts = f"synthetic {n}"
        chunks = [
            ChunkRow(
                o, a.heading, t, th, len(t) // 4, title_fts, a.heading_fts,
                a.first_fts + " " + b.second_fts,
            )
            for o, a, b, t, th, _ in parts
        ]  # fmt: skip
        body = " ".join(c.fts_body for c in chunks)
        heads = " ".join(c.fts_headings for c in chunks)
        digest = hashlib.blake2b(title.encode(), digest_size=8).hexdigest()
        row = NoteRow(
            path=f"synthetic/{n}.md",
            id=f"s{n}",
            claimed_id=f"s{n}",
            title=title,
            summary="",
            lead=parts[0][3][:200],
            created=None,
            updated=None,
            sort_time="2026-01-01T00:00:00Z",
            folder="synthetic",
            stem_key=str(n),
            path_key=f"synthetic/{n}",
            aliases=(),
            mtime_ns=0,
            size=len(body),
            content_hash=digest,
            body_hash=digest,
            version=digest,
            summary_pending=False,
            lang="en",
            fts=(title_fts, heads, body),
        )
        yield row, chunks, [p[5] for p in parts]


def batches(pool: list[Any], seed: int, n: int, need: int) -> Iterator[list[tuple]]:
    """bench/postgres.py's transactions of NOTES_PER_BATCH notes, until `need` chunks."""
    notes = synthetic_notes(pool, random.Random(seed), n)
    added = 0
    while added < need:
        batch = [next(notes) for _ in range(NOTES_PER_BATCH)]
        added += sum(len(chunks) for _, chunks, _ in batch)
        yield batch


def write_notes(w: Any, model: str, notes: list[tuple]) -> int:
    """Notes and their vectors through the port's Writes; chunks written."""
    for row, chunks, _ in notes:
        w.upsert_note(row, chunks, (), ())
    paths = [row.path for row, _, _ in notes]
    ids = w._all(  # noqa: SLF001 - a bench reads the store directly
        "SELECT c.rowid, c.text_hash FROM chunks c JOIN notes n ON n.rowid = c.note_rowid "
        "WHERE n.path = ANY(%s) ORDER BY n.path, c.ordinal",
        (paths,),
    )
    flat = [v for row, _, vecs in sorted(notes, key=lambda b: b[0].path) for v in vecs]
    vectors = [(cid, th, v) for (cid, th), v in zip(ids, flat, strict=True)]
    return w.store_vectors(model, vectors)


def _worker(url: str, schema: str, model: str, pool: list[Any], plan: dict, k: int) -> None:
    from vault_brain.index.postgres.store import Writes

    conn = connect(url, schema)
    conn.execute("SET synchronous_commit = off")
    mine: list[tuple] = []
    done = 0

    def commit() -> None:
        nonlocal done
        conn.execute("BEGIN")
        w = Writes(conn, None)
        done += write_notes(w, model, mine)
        w.flush()  # word frequencies, totals, postings: last, so their row locks are brief
        conn.execute("COMMIT")
        mine.clear()

    for i, batch in enumerate(batches(pool, plan["seed"], plan["n"], plan["need"])):
        if i % plan["workers"] != k:
            continue
        mine.extend(batch)
        if len(mine) >= NOTES_PER_BATCH * BATCHES_PER_TRANSACTION:
            commit()
            if k == 0:
                progress(f"  worker 0: {done} chunks {time.strftime('%H:%M:%S')}")
    if mine:
        commit()
    conn.close()


def index_statements(url: str) -> list[str]:
    """The statements that build the DROPPED indexes, as the port's DDL has them (read
    from a schema the port makes for the purpose, then dropped)."""
    from vault_brain.index.postgres.db import PostgresIndex
    from vault_brain.index.postgres.schema import vector_table_sql

    drop_schema(url, "bench_ddl")
    PostgresIndex(url, "bench_ddl", one_shot=True).close()
    conn = connect(url, "bench_ddl", vectors=False)
    for sql in vector_table_sql("vectors_instant", 256):
        conn.execute(sql)
    out = []
    for name in DROPPED:
        row = conn.execute(
            "SELECT c.conname, c.conrelid::regclass::text, pg_get_constraintdef(c.oid) "
            "FROM pg_constraint c "
            "WHERE c.conname = %s AND c.connamespace = 'bench_ddl'::regnamespace",
            (name,),
        ).fetchone()
        if row is not None:
            out.append(f'ALTER TABLE {row[1]} ADD CONSTRAINT "{row[0]}" {row[2]}')
        else:
            row = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'bench_ddl' AND indexname = %s",
                (name,),
            ).fetchone()
            out.append(row[0])
    conn.close()
    drop_schema(url, "bench_ddl")
    return [sql.replace("bench_ddl.", "") for sql in out]


def drop_indexes(url: str, schema: str) -> None:
    """The DROPPED indexes that exist in `schema`, dropped."""
    conn = connect(url, schema, vectors=False)
    for name in DROPPED:
        row = conn.execute(
            "SELECT c.conrelid::regclass::text FROM pg_constraint c "
            "WHERE c.conname = %s AND c.connamespace = %s::regnamespace",
            (name, schema),
        ).fetchone()
        if row is not None:
            conn.execute(f'ALTER TABLE {row[0]} DROP CONSTRAINT "{name}"')
        else:
            conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    conn.close()


def build_indexes(url: str, schema: str, statements: list[str]) -> dict[str, float]:
    """The dropped indexes built again, by sorting; seconds each."""
    conn = connect(url, schema, vectors=False)
    conn.execute("SET max_parallel_maintenance_workers = 1")  # the second core
    out = {}
    for sql in statements:
        hnsw = "USING hnsw" in sql
        conn.execute(f"SET maintenance_work_mem = '{'6GB' if hnsw else '2GB'}'")
        started = time.perf_counter()
        conn.execute(sql)
        name = sql.split('"')[1] if sql.startswith("ALTER") else sql.split(" ON ")[0].split()[-1]
        out[name] = round(time.perf_counter() - started, 1)
        progress(f"  built {name}: {out[name]} s")
    conn.close()
    return out


def grow(
    url: str, schema: str, target: int, workers: int, pool: list[Any] | None = None
) -> dict[str, Any]:
    """The index in `schema` grown to `target` chunks with bench/postgres.py's synthetic
    notes (its seed: the target), `workers` processes at once; then its indexes rebuilt
    and VACUUM ANALYZE."""
    from bench.postgres import pieces, real_chunks_of

    conn = connect(url, schema, vectors=False)
    have = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    n = conn.execute("SELECT count(*) FROM notes WHERE path LIKE 'synthetic/%%'").fetchone()[0]
    model = conn.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()[0]
    conn.close()
    out: dict[str, Any] = {"chunks_before": have}
    if have >= target:
        return out
    if pool is None:
        started = time.perf_counter()
        pool = pieces(real_chunks_of(connect(url, schema)))
        out["pool_s"] = round(time.perf_counter() - started, 1)
    rebuild = index_statements(url)
    drop_indexes(url, schema)
    plan = {"seed": target, "n": n, "need": target - have, "workers": workers}
    started = time.perf_counter()
    ctx = multiprocessing.get_context("fork")  # the pool is shared, not pickled
    procs = [
        ctx.Process(target=_worker, args=(url, schema, model, pool, plan, k))
        for k in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit(f"a writer failed: exit codes {[p.exitcode for p in procs]}")
    grow_s = time.perf_counter() - started
    conn = connect(url, schema, vectors=False)
    now = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    out["write_s"] = round(grow_s, 1)
    out["chunks_per_s"] = round((now - have) / grow_s)
    progress(f"  {now} chunks, {out['chunks_per_s']}/s; building indexes")
    out["index_build_s"] = build_indexes(url, schema, rebuild)
    started = time.perf_counter()
    conn = connect(url, schema, vectors=False)
    conn.execute("VACUUM (ANALYZE) note_postings, notes, chunks, vectors_instant")
    conn.close()
    out["vacuum_s"] = round(time.perf_counter() - started, 1)
    out["chunks"] = now
    return out


def clone(url: str, src: str, dst: str, bare: bool = False) -> float:
    """A copy of schema `src` as `dst`: the port's DDL (so the tables are its own), the
    rows copied, the DROPPED indexes built after (not at all if `bare`: a growth follows,
    which builds them). Seconds taken."""
    from vault_brain.index.postgres.db import PostgresIndex
    from vault_brain.index.postgres.schema import vector_table_sql

    started = time.perf_counter()
    PostgresIndex(url, dst, one_shot=True).close()  # the schema as the port makes it
    rebuild = [] if bare else index_statements(url)
    drop_indexes(url, dst)
    conn = connect(url, dst, vectors=False)
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (src,)
        )
    ]
    conn.execute("SET session_replication_role = replica")  # copied rows: no FK checks
    conn.execute("SET maintenance_work_mem = '2GB'")
    for table in tables:
        if table.startswith("vectors_"):
            dim = conn.execute(f'SELECT vector_dims(embedding) FROM "{src}".{table} LIMIT 1')
            found = dim.fetchone()
            conn.execute(vector_table_sql(table, found[0] if found else 1)[0])
        conn.execute(f"DELETE FROM {table}")  # meta, fts_stats: the source's rows instead
        conn.execute(f'INSERT INTO {table} OVERRIDING SYSTEM VALUE SELECT * FROM "{src}".{table}')
        progress(f"  copied {table}")
    for table, column in (("notes", "rowid"), ("chunks", "rowid"), ("gone_notes", "rowid")):
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
            f"(SELECT coalesce(max({column}), 0) + 1 FROM {table}), false)"
        )
    conn.execute("SET session_replication_role = DEFAULT")
    conn.close()
    build_indexes(url, dst, rebuild)  # the vector tables' indexes are among them
    return time.perf_counter() - started


def fingerprint(url: str, schema: str) -> dict[str, str]:
    """An md5 of each table's rows, surrogate keys replaced by what they stand for (a
    note's path, a chunk's path and ordinal), and of the index definitions: two schemas
    holding the same rows and indexes have the same fingerprint."""
    conn = connect(url, schema, vectors=False)
    note = "(SELECT path FROM notes x WHERE x.rowid = {})"
    chunk = "(SELECT n.path || '#' || c.ordinal FROM chunks c JOIN notes n ON n.rowid = c.note_rowid WHERE c.rowid = {})"  # noqa: E501
    queries = {
        "notes": "SELECT (t.*)::text FROM (SELECT path, id, claimed_id, title, summary, "
        "llm_summary, lead, created, updated, sort_time, folder, stem_key, path_key, aliases, "
        "mtime_ns, size, content_hash, body_hash, version, summary_state, lang, tsv, flen "
        "FROM notes) t",
        "chunks": f"SELECT {note.format('c.note_rowid')} || (t.*)::text FROM chunks c, LATERAL "
        "(SELECT c.ordinal, c.heading_path, c.text, c.text_hash, c.tokens, c.vec_state, "
        "c.strong_state, c.tsv, c.tf, c.flen) t",
        "note_postings": f"SELECT p.term || {note.format('p.note')} || p.w || '/' || p.flen "
        "|| '/' || p.imp FROM note_postings p",
        "vectors_instant": f"SELECT {chunk.format('v.chunk_rowid')} || "
        f"{note.format('v.note_rowid')} || v.embedding::text FROM vectors_instant v",
        "indexes": f"SELECT replace(indexdef, '{schema}.', '') FROM pg_indexes "
        f"WHERE schemaname = '{schema}'",
    }
    for table in ("note_terms", "chunk_terms", "fts_stats", "embed_cache", "meta", "tags"):
        queries[table] = f"SELECT (t.*)::text FROM {table} t"
    out = {}
    for name, sql in queries.items():
        row = conn.execute(f"SELECT md5(coalesce(string_agg(r, E'\\n' ORDER BY r), '')), "
                           f"count(*) FROM ({sql}) s(r)").fetchone()  # fmt: skip
        out[name] = f"{row[1]} rows, md5 {row[0]}"
    conn.close()
    return out


def check(url: str, src: str, chunks: int, workers: int) -> dict[str, Any]:
    """The same growth of `chunks` chunks from one clone of `src`, once through
    bench/postgres.py's port path and once through this fast path: every table equal."""
    from bench.postgres import grow as port_grow
    from bench.postgres import pieces, real_chunks_of

    pool = pieces(real_chunks_of(connect(url, src)))
    conn = connect(url, src, vectors=False)
    target = conn.execute("SELECT count(*) FROM chunks").fetchone()[0] + chunks
    conn.close()
    for name in ("chk_port", "chk_fast"):
        drop_schema(url, name)
        clone(url, src, name)
    started = time.perf_counter()
    brain = _brain_writes(url, "chk_port")
    port_grow(brain, brain.model, target, pool)
    brain.index.close()
    port_s = time.perf_counter() - started
    fast = grow(url, "chk_fast", target, workers, pool)
    a, b = fingerprint(url, "chk_port"), fingerprint(url, "chk_fast")
    for name in ("chk_port", "chk_fast"):
        drop_schema(url, name)
    same = {k: a[k] == b[k] for k in a}
    return {"port_s": round(port_s, 1), "fast": fast, "port": a, "fast_rows": b, "same": same}


class _brain_writes:  # noqa: N801 - stands in for a Brain in bench/postgres.py's grow
    """What bench/postgres.py's `grow` asks of a Brain (status, index.read/transaction),
    on a PostgresIndex: the port itself, with its vault lock and transactions."""

    def __init__(self, url: str, schema: str) -> None:
        from vault_brain.index.postgres.db import PostgresIndex

        self.index = PostgresIndex(url, schema, one_shot=True)
        conn = connect(url, schema, vectors=False)
        self.model = conn.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()[0]
        conn.close()

    def status(self) -> Any:
        with self.index.read() as r:
            return r.counts()


def drop_schema(url: str, schema: str) -> None:
    conn = connect(url, "public", vectors=False)
    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("clone", "grow", "check"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--from", dest="src", default="bench_cpp")
    parser.add_argument("--to", default="bench_1m")
    parser.add_argument("--schema", default="bench_1m")
    parser.add_argument("--level", default="1m")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=3000, help="check: chunks grown")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    from bench.postgres import level_chunks
    from vault_brain.log import set_quiet

    set_quiet(True)
    if args.action == "clone":
        report: dict[str, Any] = {"clone_s": round(clone(args.url, args.src, args.to, True), 1)}
    elif args.action == "grow":
        report = grow(args.url, args.schema, level_chunks(args.level), args.workers)
    else:
        report = check(args.url, args.src, args.chunks, args.workers)
        report["all_same"] = all(report["same"].values())
    print(write_json(report, args.json_out))
    return 0 if report.get("all_same", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
