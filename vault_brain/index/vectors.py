"""Vector catch-up: pending chunks → embedding cache → model → the tier's vectors, for
every backend (index/port.py's VectorQueueReads / VectorQueueWrites).

Full text is written first by sync; vectors follow in the background, so a slow or dead
embedding endpoint never holds up a save or a search. Reads run on a read snapshot; only
the final write takes the index's write transaction, never the model call."""

from __future__ import annotations

from vault_brain.embed.base import Embedder
from vault_brain.index.leads import Leads
from vault_brain.index.port import Index
from vault_brain.index.records import INSTANT, LeadsFirst, PendingChunk


def vectors_ready(index: Index, embedder: Embedder | None, tier: str = INSTANT) -> bool:
    """True when the tier holds this model's vectors (two models never mix)."""
    if embedder is None:
        return False
    with index.read() as r:
        held = r.vectors_model(tier)
    return held is not None and held[0] == embedder.name


def ensure_model(index: Index, embedder: Embedder, tier: str = INSTANT) -> None:
    """A new model (or dimension) for the tier: drop its vectors, queue every chunk again."""
    if vectors_ready(index, embedder, tier):
        return
    dim = embedder.dimension()  # may load a model or probe an endpoint: outside any lock
    with index.transaction() as w:
        held = w.vectors_model(tier)
        if held is None or held[0] != embedder.name:
            w.reset_vectors(embedder.name, dim, tier)


def embed_batch(
    index: Index,
    embedder: Embedder,
    batch_size: int,
    tier: str = INSTANT,
    *,
    leads: Leads | None = None,
) -> int:
    """Embed one batch of the tier's pending chunks (with `leads`, the notes' lead chunks
    before any other, and `leads` follows); returns how many vectors were written (0: none
    left). Raises what the embedder raises; nothing is marked done then."""
    order = leads.order if leads is not None else None
    found = _pending(index, embedder, batch_size, tier, order)
    if found is None:  # the tier holds no vectors of this model yet
        ensure_model(index, embedder, tier)
        if leads is not None:
            leads.restart()  # every chunk is pending again
            order = leads.order
        found = _pending(index, embedder, batch_size, tier, order)
        if found is None:  # another process switched the tier to its model meanwhile
            return 0
    pending, cached, width = found
    if not pending:
        return 0
    # A server may change a model's dimension under the same name: such cache rows are stale.
    cached = {h: v for h, v in cached.items() if len(v) == width}
    missing = [p for p in pending if p.text_hash not in cached]
    if missing:
        # numpy only here: a one-shot search's refresh with nothing to embed never loads it.
        import numpy as np

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
    if leads is not None:
        leads.embedded(pending, batch_size, order)
    return len(items)


def _pending(
    index: Index, embedder: Embedder, batch_size: int, tier: str, order: LeadsFirst | None
) -> tuple[list[PendingChunk], dict[str, bytes], int] | None:
    """(pending chunks, their cached vectors, vector width in bytes) on one snapshot; None
    when the tier does not hold this model's vectors. One read per batch: the background
    embeds every save's chunks, so each extra snapshot is paid per save."""
    with index.read() as r:
        model = r.vectors_model(tier)
        if model is None or model[0] != embedder.name:
            return None
        pending = r.pending_chunks(batch_size, tier, leads=order)
        hashes = [p.text_hash for p in pending]
        cached = r.cached_vectors(embedder.name, hashes) if pending else {}
    return pending, cached, model[1] * 4
