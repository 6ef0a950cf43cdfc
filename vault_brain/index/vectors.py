"""Vector catch-up: pending chunks → embedding cache → model → the tier's vector table.

Full text is written first by sync; vectors follow in the background, so a slow or dead
embedding endpoint never holds up a save or a search. Reads run on a reader connection;
only the final write takes the index's write transaction, never the model call."""

from __future__ import annotations

import numpy as np

from vault_brain.embed.base import Embedder
from vault_brain.index.db import SqliteIndex
from vault_brain.index.store import INSTANT, Tier


def vectors_ready(index: SqliteIndex, embedder: Embedder | None, tier: Tier = INSTANT) -> bool:
    """True when the tier's table holds this model's vectors (two models never mix)."""
    if embedder is None:
        return False
    with index.read() as r:
        held = r.vectors_model(tier)
    return held is not None and held[0] == embedder.name


def ensure_model(index: SqliteIndex, embedder: Embedder, tier: Tier = INSTANT) -> None:
    """A new model (or dimension) for the tier: drop its vectors, queue every chunk again."""
    if vectors_ready(index, embedder, tier):
        return
    dim = embedder.dimension()  # may load a model or probe an endpoint: outside any lock
    with index.transaction() as w:
        held = w.vectors_model(tier)
        if held is None or held[0] != embedder.name:
            w.reset_vectors(embedder.name, dim, tier)


def embed_batch(
    index: SqliteIndex, embedder: Embedder, batch_size: int, tier: Tier = INSTANT
) -> int:
    """Embed one batch of the tier's pending chunks; returns how many vectors were written
    (0: none left). Raises what the embedder raises; nothing is marked done then."""
    ensure_model(index, embedder, tier)
    with index.read() as r:
        pending = r.pending_chunks(batch_size, tier)
        if not pending:
            return 0
        cached = r.cached_vectors(embedder.name, [p.text_hash for p in pending])
        model = r.vectors_model(tier)
    # A server may change a model's dimension under the same name: such cache rows are stale.
    width = (model[1] if model else 0) * 4
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
    with index.transaction() as w:
        w.store_vectors(embedder.name, items, tier)
    return len(items)
