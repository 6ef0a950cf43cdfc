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
    # A server may change a model's dimension under the same name: such cache rows are stale.
    width = int(store.get_meta(conn, "embed_dim") or 0) * 4
    cached = {h: v for h, v in cached.items() if len(v) == width}
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


# A vault's chunk vectors fit in memory (10k notes ≈ 34k chunks ≈ 35 MB at 256 dims), and
# an exact numpy scan of them is ~20x faster than vec0's own brute-force scan here
# (docs/benchmarks.md). Beyond this many rows the vec0 KNN answers instead.
MATRIX_MAX_ROWS = 400_000


class VectorMatrix:
    """An in-memory copy of the vector table for exact cosine search, reloaded whenever the
    table changes (the meta counter `vec_epoch`, moved by every vector write or delete)."""

    def __init__(self, max_rows: int = MATRIX_MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._key: tuple[str, str] | None = None
        self._rowids = np.empty(0, dtype=np.int64)
        self._notes = np.empty(0, dtype=np.int64)
        self._matrix: np.ndarray | None = None

    def _refresh(self, conn: Connection, model: str) -> np.ndarray | None:
        key = (model, store.vector_epoch(conn))
        with self._lock:
            if key != self._key:
                self._key = key
                if store.vector_count(conn) > self.max_rows:
                    self._matrix = None
                else:
                    rowids, notes, blob = store.all_vectors(conn)
                    matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rowids), -1)
                    self._rowids = np.asarray(rowids, dtype=np.int64)
                    self._notes = np.asarray(notes, dtype=np.int64)
                    self._matrix = matrix
            return self._matrix

    def search(
        self, conn: Connection, model: str, vector: np.ndarray, filters: store.Filters, k: int
    ) -> list[store.ChunkHit]:
        """Top k chunks by cosine (vectors are unit length, so a dot product)."""
        matrix = self._refresh(conn, model)
        if matrix is None:
            return store.search_vectors(conn, vector, filters, k)
        rowids, notes = self._rowids, self._notes
        if len(rowids) == 0:
            return []
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        # A zero vector (text the model has no tokens for) matches nothing.
        usable = scores != 0.0
        if filters.active:
            usable &= np.isin(notes, store.filtered_note_rowids(conn, filters))
        scores = np.where(usable, scores, -np.inf)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [
            store.ChunkHit(int(rowids[i]), int(notes[i]), float(scores[i]))
            for i in top
            if np.isfinite(scores[i])
        ]
