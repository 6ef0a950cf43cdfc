"""A one-shot process's KNN (matrix.scan) without numpy, where the C module is built.

sqlite-vec's chunks of vectors are read one at a time as matrix.scan reads them; the C
module (vault_brain/native/querynative.c) scores each chunk's valid slots with the query and
picks the k best with the noise's two medians, as matrix._best does. Its cosines are the
products matrix.slice_products takes when the module is built (a fixed order per row), so
this answers what the resident's matrix answers, to the bit (tests/index/test_vecscan.py).
The one-shot search's forked child then imports no numpy (docs/benchmarks.md, "The first
search, round 10"). Without the module, the store asks matrix.scan.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

from vault_brain.index.records import ChunkHit, Filters, VectorHits

if TYPE_CHECKING:
    from vault_brain.index.sqlite.store import Reads

MAX_ROWS = 400_000  # matrix.MAX_ROWS (not imported: matrix imports numpy)


def native() -> Any:
    """The C module, or None where it is not built (or the host is big-endian: sqlite-vec
    and the vectors are little-endian)."""
    from vault_brain.native import query_module

    return query_module()


def scan(
    reads: Reads,
    vector: Any,
    filters: Filters,
    k: int,
    tier: str,
    noise: bool = True,
    max_rows: int = MAX_ROWS,
) -> VectorHits | None:
    """matrix.scan's answer (None when the KNN must answer), by the C module (the caller
    asks matrix.scan where `native()` is None)."""
    module = native()
    if module is None:
        raise RuntimeError("vault_brain.native.querynative is not built")
    _keep_blobs_in_the_heap(module)
    query = _float32(vector)
    width = len(query) // 4
    slots = reads.vector_slots(tier)
    total = sum(size for _, size, _, _ in slots)
    scores = bytearray(4 * total)
    ids = bytearray(8 * total)
    at = 0
    blobs = iter(reads.vector_slot_blobs(tier))
    for chunk_id, size, bits, rowids in slots:
        got, blob = next(blobs, (None, b""))
        if got != chunk_id or len(blob) != 4 * size * width or 8 * len(bits) < size:
            return None  # not laid out as this reads it: the KNN answers
        at += module.chunk_products(blob, bits, rowids, size, width, query, scores, ids, at)
        if at > max_rows:
            return None
    if at == 0:
        return VectorHits([], 0.0, 0.0)
    allowed = None
    if filters.active:
        allowed = array("q", sorted(reads.filtered_chunk_rowids(filters))).tobytes()
    top, values, median, spread = module.best(scores, ids, at, k, noise, allowed)
    found = memoryview(ids).cast("q")
    chunks = [found[i] for i in top]
    notes = reads.chunk_notes(chunks)
    hits = [
        ChunkHit(c, notes[c], s)
        for c, s in zip(chunks, values, strict=True)
        if c in notes  # (a vector whose chunk is gone: none, the store deletes both at once)
    ]
    return VectorHits(hits, median, spread)


_heap_ready = False


def _keep_blobs_in_the_heap(module: Any) -> None:
    """Free one untouched 4 MB block, once per process (the C module's keep_heap, as
    e5_query._keep_temporaries_in_the_heap, which the numpy path ran before its scan):
    glibc's malloc then serves sqlite-vec's ~1.5 MB chunk blobs (SQLite's buffer and the
    bytes the binding copies them into) from the heap instead of a fresh mapping each."""
    global _heap_ready
    if not _heap_ready:
        _heap_ready = True
        module.keep_heap()


def _float32(vector: Any) -> bytes:
    """The query's float32 bytes: an array('f') as it is, anything else through numpy."""
    if isinstance(vector, array) and vector.typecode == "f":
        return vector.tobytes()
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()
