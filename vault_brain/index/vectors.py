"""Vector catch-up: pending chunks → embedding cache → model → vec0 table.

Full text is written first by sync; vectors follow in the background, so a slow or dead
embedding endpoint never holds up a save or a search."""

from __future__ import annotations

import threading

import numpy as np

from vault_brain.embed import Embedder
from vault_brain.index import store
from vault_brain.index.db import Connection


def vectors_ready(conn: Connection, embedder: Embedder | None) -> bool:
    """True when the vec0 table holds this model's vectors (two models never mix)."""
    if embedder is None or not store.has_vector_table(conn):
        return False
    return store.get_meta(conn, "embed_model") == embedder.name


def ensure_model(conn: Connection, embedder: Embedder, lock: threading.RLock) -> None:
    """A new model (or dimension): drop old vectors and queue every chunk again."""
    if vectors_ready(conn, embedder):
        return
    dim = embedder.dimension()  # may load a model or probe an endpoint: outside the lock
    with lock:
        if vectors_ready(conn, embedder):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            store.reset_vectors(conn, embedder.name, dim)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def embed_batch(
    conn: Connection, embedder: Embedder, lock: threading.RLock, batch_size: int
) -> int:
    """Embed one batch of pending chunks; returns how many vectors were written (0: none left).

    Raises Unavailable when the embedder fails; nothing is marked done then."""
    ensure_model(conn, embedder, lock)
    pending = store.pending_chunks(conn, batch_size)
    if not pending:
        return 0
    cached = store.cached_vectors(conn, embedder.name, [p.text_hash for p in pending])
    missing = [p for p in pending if p.text_hash not in cached]
    if missing:
        # Identical chunk texts (boilerplate) are embedded once.
        unique: dict[str, str] = {}
        for p in missing:
            unique.setdefault(p.text_hash, p.embed_text)
        vectors = np.asarray(embedder.embed(list(unique.values())), dtype=np.float32)
        for h, vec in zip(unique, vectors, strict=True):
            cached[h] = vec.tobytes()
    items = [(p.rowid, p.text_hash, cached[p.text_hash]) for p in pending]
    with lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            store.store_vectors(conn, embedder.name, items)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(items)
