"""An in-memory copy of the chunk vectors for exact cosine search.

A vault's chunk vectors fit in memory (10k notes ≈ 34k chunks ≈ 35 MB at 256 dims), and an
exact numpy scan of them is ~20x faster than sqlite-vec's brute-force scan here
(docs/benchmarks.md). Every search gets one immutable snapshot (vectors, chunk rowids, note
rowids), so a refresh in another thread can never mix two generations. Beyond MAX_ROWS
vectors the caller falls back to sqlite-vec's own KNN.

A one-shot process (the CLI) holds no copy: `scan` reads sqlite-vec's chunks of vectors one
at a time and scores them with the same products, slice by slice, so it gives the resident's
answer to the bit, faster than sqlite-vec's own scalar KNN (docs/benchmarks.md, "The first
search, round 9").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vault_brain.index.records import ChunkHit, Filters, VectorHits
from vault_brain.index.sqlite import vecscan

if TYPE_CHECKING:
    from vault_brain.index.sqlite.store import Reads

MAX_ROWS = vecscan.MAX_ROWS
MAD_TO_SIGMA = 1.4826  # a normal distribution's standard deviation from its MAD
# Many questions at once (nearest_each): their product with this many rows at a time.
BLOCK_ROWS = 4096
# A query's cosines are the products of SLICE_ROWS-row slices of the rows (from the first;
# the last one shorter), each a contiguous array of its own: a BLAS kernel's arithmetic for
# a row depends on its place among the rows it is given (one product of cpp-docs' 34k rows
# gave 2-3 rows a cosine other in the last bit than its slice's), so a row's cosine is its
# slice's product wherever it is computed: search(), nearest_each()'s rescoring and a
# one-shot process's scan of sqlite-vec's chunks (scan) give the same bits.
SLICE_ROWS = 256
EPS32 = float(np.finfo(np.float32).eps) / 2  # float32's unit roundoff


@dataclass(frozen=True)
class _Snapshot:
    key: tuple[str, str]  # (model, vector epoch) it was loaded at
    matrix: np.ndarray | None  # None: too many rows, use the KNN
    chunks: np.ndarray
    notes: np.ndarray


class VectorMatrix:
    """Reloaded whenever the vector table changes (the meta counter `vec_epoch`, moved by
    every vector write or delete)."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._load_lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        # Each note's mean vector (unit length) and its note rowids, sorted, for the
        # snapshot it was made from: related notes (index/port.py) ask only 10k rows.
        self._means: tuple[_Snapshot, np.ndarray, np.ndarray] | None = None

    def rows(self) -> int:
        snap = self._snapshot
        return 0 if snap is None or snap.matrix is None else len(snap.chunks)

    def _current(self, reads: Reads, model: str, tier: str) -> _Snapshot:
        key = (model, reads.vector_epoch(tier))
        snap = self._snapshot
        if snap is not None and snap.key == key:
            return snap
        with self._load_lock:  # one loader; others wait for its snapshot
            snap = self._snapshot
            if snap is not None and snap.key == key:
                return snap
            empty = np.empty(0, dtype=np.int64)
            if reads.vector_count(tier) > self.max_rows:
                snap = _Snapshot(key, None, empty, empty)
            else:
                chunks, notes, blob = reads.all_vectors(tier)
                matrix = np.frombuffer(blob, dtype=np.float32)
                width = matrix.size // len(chunks) if chunks else 1
                snap = _Snapshot(
                    key,
                    matrix.reshape(len(chunks), width),
                    np.asarray(chunks, dtype=np.int64),
                    np.asarray(notes, dtype=np.int64),
                )
            self._snapshot = snap
            return snap

    def search(
        self,
        reads: Reads,
        model: str,
        vector: np.ndarray,
        filters: Filters,
        k: int,
        tier: str,
        noise: bool = True,
    ) -> VectorHits | None:
        """Top k chunks by cosine (vectors are unit length: a dot product), with the noise
        level of this query's cosines over the whole vault (unless `noise` is False: two
        medians over every chunk, skipped when the model's scale is known); None when the
        KNN must answer."""
        snap = self._current(reads, model, tier)
        if snap.matrix is None:
            return None
        if len(snap.chunks) == 0:
            return VectorHits([], 0.0, 0.0)
        scores = slice_products([snap.matrix], len(snap.chunks), vector)
        usable = None
        if filters.active:
            usable = np.isin(snap.notes, reads.filtered_note_rowids(filters))
        top, scores, median, spread = _best(scores, usable, k, noise)
        # Plain Python numbers in one call per column: a numpy scalar per hit cost 0.2 ms.
        hits = list(
            map(ChunkHit, snap.chunks[top].tolist(), snap.notes[top].tolist(), scores[top].tolist())
        )
        return VectorHits(hits, median, spread)

    def nearest_each(
        self, reads: Reads, model: str, vectors: np.ndarray, tier: str
    ) -> list[ChunkHit | None] | None:
        """Each row of `vectors`' nearest chunk as search(k=1, no filters, no noise) finds
        it, for one matrix product of them all instead of a pass over every vector each:
        the product names each row's candidates (the chunks its rounding cannot tell from
        the best: a bound in the dimension), and search's own product over the slice of
        rows around each candidate scores them again, so the chunk and its score are
        search's to the bit. None when the KNN must answer."""
        snap = self._current(reads, model, tier)
        if snap.matrix is None:
            return None
        queries = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        found: list[ChunkHit | None] = [None] * len(queries)
        rows = len(snap.chunks)
        if rows == 0 or len(queries) == 0:
            return found
        matrix = snap.matrix
        # A float32 dot product of q and x, summed in any order, is within δ = γ·|q|·|x|
        # of the exact one (γ = d·u/(1 − d·u)): the row search finds best scores at least
        # the product's best − 4δ in the product. The margin is twice that.
        width = matrix.shape[1]
        gamma = width * EPS32 / (1.0 - width * EPS32)
        longest = float(np.sqrt(np.einsum("ij,ij->i", matrix, matrix).max()))
        margin = 8.0 * gamma * longest * np.linalg.norm(queries, axis=1)
        best = np.full(len(queries), -np.inf, dtype=np.float32)
        near_q, near_r, near_s = [], [], []
        for start in range(0, rows, BLOCK_ROWS):
            scores = queries @ matrix[start : start + BLOCK_ROWS].T
            top = scores.max(axis=1)
            np.maximum(best, top, out=best)
            floor = (best - margin).astype(np.float32)
            ask = np.flatnonzero(top >= floor)  # the questions with candidates in the block
            q, r = np.nonzero(scores[ask] >= floor[ask, None])
            near_q.append(ask[q])
            near_r.append(r + start)
            near_s.append(scores[ask[q], r])
        q, r, s = np.concatenate(near_q), np.concatenate(near_r), np.concatenate(near_s)
        alone = best <= 2.0 * margin  # no cosine above the rounding of 0: search answers
        keep = (s >= (best - margin).astype(np.float32)[q]) & ~alone[q]
        q, r = q[keep], r[keep]
        # search()'s own scores of the candidates: their slices' products.
        slices = -(-rows // SLICE_ROWS)
        pairs, inverse = np.unique(q * slices + r // SLICE_ROWS, return_inverse=True)
        exact = np.empty(len(r), dtype=np.float32)
        by_pair = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[by_pair], np.arange(len(pairs) + 1))
        for n, pair in enumerate(pairs.tolist()):
            at = by_pair[bounds[n] : bounds[n + 1]]
            query, part = divmod(pair, slices)
            first = part * SLICE_ROWS
            rows = matrix[first : first + SLICE_ROWS]
            exact[at] = slice_products([rows], len(rows), queries[query])[r[at] - first]
        # Each row's best candidate. Where two share its score, which of them search's
        # selection takes is its partition's own affair (numpy's SIMD one picks neither the
        # first nor the last): search answers that row alone, as it does the rows whose
        # best cosine is within the rounding of 0 (a zero score is no match).
        order = np.lexsort((r, -exact, q))
        q, r, exact = q[order], r[order], exact[order]
        heads = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        tied = np.zeros(len(queries), dtype=bool)
        follows = heads + 1 < len(q)
        at = heads[follows]
        tied[q[at][(q[at + 1] == q[at]) & (exact[at + 1] == exact[at])]] = True
        for i in heads.tolist():
            found[int(q[i])] = ChunkHit(
                int(snap.chunks[r[i]]), int(snap.notes[r[i]]), float(exact[i])
            )
        for i in np.flatnonzero(tied | alone).tolist():
            hits = self.search(reads, model, queries[i], Filters(), 1, tier, noise=False)
            found[i] = hits.hits[0] if hits is not None and hits.hits else None  # type: ignore[union-attr]
        return found

    def nearest_notes(
        self, reads: Reads, model: str, note_rowid: int, k: int, tier: str
    ) -> list[int] | None:
        """The k notes whose mean vector is nearest (cosine) to this note's, best first,
        without it; [] when it has no vectors in this tier; None when the KNN must answer
        (too many vectors to hold)."""
        snap = self._current(reads, model, tier)
        if snap.matrix is None:
            return None
        means, notes = self._note_means(snap)
        at = int(np.searchsorted(notes, note_rowid))
        if at >= len(notes) or notes[at] != note_rowid or k <= 0:
            return []
        scores = means @ means[at]
        scores[at] = -np.inf
        scores[~np.isfinite(scores) | (scores == 0.0)] = -np.inf
        k = min(k, len(scores) - 1)
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return notes[top[np.isfinite(scores[top])]].tolist()

    def _note_means(self, snap: _Snapshot) -> tuple[np.ndarray, np.ndarray]:
        held = self._means
        if held is not None and held[0] is snap:
            return held[1], held[2]
        with self._load_lock:
            held = self._means
            if held is not None and held[0] is snap:
                return held[1], held[2]
            assert snap.matrix is not None
            if len(snap.notes) == 0:
                self._means = (snap, snap.matrix, snap.notes)
                return snap.matrix, snap.notes
            order = np.argsort(snap.notes, kind="stable")
            sorted_notes = snap.notes[order]
            starts = np.flatnonzero(np.r_[True, sorted_notes[1:] != sorted_notes[:-1]])
            sums = np.add.reduceat(snap.matrix[order], starts, axis=0)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            means = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
            self._means = (snap, means, sorted_notes[starts])
            return means, sorted_notes[starts]


def scan(
    reads: Reads,
    vector: np.ndarray,
    filters: Filters,
    k: int,
    tier: str,
    noise: bool = True,
    max_rows: int = MAX_ROWS,
) -> VectorHits | None:
    """VectorMatrix.search's answer, without a copy of the vectors held: sqlite-vec's
    chunks of vectors read one at a time (Reads.vector_slots: the order of its full scan,
    which is the matrix's), their valid rows scored slice by slice as search() scores
    them. None when the KNN must answer (more than max_rows vectors, or a table not laid
    out as this reads it)."""
    slots = reads.vector_slots(tier)
    valid = [
        np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:size].view(bool)
        for _, size, bits, _ in slots
    ]
    counts = [int(np.count_nonzero(v)) for v in valid]
    total = sum(counts)
    sizes = [size for _, size, _, _ in slots]
    if total > max_rows or [len(v) for v in valid] != sizes:
        return None
    if total == 0:
        return VectorHits([], 0.0, 0.0)
    rowids = [np.frombuffer(ids, dtype=np.int64)[:size] for _, size, _, ids in slots]
    chunks = np.concatenate([r[v] for r, v in zip(rowids, valid, strict=True)])
    blocks = _valid_rows(reads.vector_slot_blobs(tier), slots, valid, counts, len(vector))
    try:
        scores = slice_products(blocks, total, vector)
    except _Layout:
        return None
    usable = None
    if filters.active:
        usable = np.isin(chunks, reads.filtered_chunk_rowids(filters))
    top, scores, median, spread = _best(scores, usable, k, noise)
    found = chunks[top].tolist()
    notes = reads.chunk_notes(found)
    hits = [
        ChunkHit(c, notes[c], s)
        for c, s in zip(found, scores[top].tolist(), strict=True)
        if c in notes  # (a vector whose chunk is gone: none, the store deletes both at once)
    ]
    return VectorHits(hits, median, spread)


class _Layout(Exception):
    """sqlite-vec's chunks are not what its chunk table says."""


def _valid_rows(
    blobs: Iterable[tuple[int, bytes]],
    slots: list[tuple[int, int, bytes, bytes]],
    valid: list[np.ndarray],
    counts: list[int],
    width: int,
) -> Iterable[np.ndarray]:
    """Each sqlite-vec chunk's valid rows, in order: a view where they lead the chunk
    unbroken (a chunk nothing was deleted from), else a copy."""
    blobs = iter(blobs)
    for (chunk_id, size, _, _), v, n in zip(slots, valid, counts, strict=True):
        got, blob = next(blobs, (None, b""))
        if got != chunk_id or len(blob) != 4 * size * width:
            raise _Layout(chunk_id)
        rows = np.frombuffer(blob, dtype=np.float32).reshape(size, width)
        yield rows[:n] if v[:n].all() else rows[v]


def slice_products(blocks: Iterable[np.ndarray], total: int, vector: np.ndarray) -> np.ndarray:
    """The cosines of the rows `blocks` hold, in order (`total` rows in all), with the unit
    `vector`: SLICE_ROWS rows at a time from the first (the last slice shorter), each slice
    a contiguous array of its own (a view of a block where it lies in one, else gathered).
    Where the C module is built, each row's product in its fixed order instead (the one
    vecscan.scan takes: a one-shot search and the resident give the same cosines)."""
    v = np.asarray(vector, dtype=np.float32)
    module = vecscan.native()
    if module is not None:
        return _native_products(module, blocks, total, np.ascontiguousarray(v))
    scores = np.empty(total, dtype=np.float32)
    gathered: np.ndarray | None = None
    filled = at = 0
    for rows in blocks:
        i = 0
        if filled:
            take = min(SLICE_ROWS - filled, len(rows))
            gathered[filled : filled + take] = rows[:take]  # type: ignore[index]
            filled += take
            i = take
            if filled == SLICE_ROWS:
                scores[at : at + SLICE_ROWS] = gathered @ v  # type: ignore[operator]
                at += SLICE_ROWS
                filled = 0
        while len(rows) - i >= SLICE_ROWS:
            scores[at : at + SLICE_ROWS] = rows[i : i + SLICE_ROWS] @ v
            at += SLICE_ROWS
            i += SLICE_ROWS
        if i < len(rows):
            if gathered is None:
                gathered = np.empty((SLICE_ROWS, rows.shape[1]), dtype=np.float32)
            rest = len(rows) - i
            gathered[filled : filled + rest] = rows[i:]
            filled += rest
    if filled:
        scores[at : at + filled] = gathered[:filled] @ v  # type: ignore[index]
        at += filled
    if at != total:
        raise _Layout(at)
    return scores


def _native_products(
    module: Any, blocks: Iterable[np.ndarray], total: int, v: np.ndarray
) -> np.ndarray:
    scores = np.empty(total, dtype=np.float32)
    at = 0
    for rows in blocks:
        n = len(rows)
        if at + n > total:
            raise _Layout(at + n)
        module.products(
            np.ascontiguousarray(rows, dtype=np.float32), len(v), v, scores[at : at + n]
        )
        at += n
    if at != total:
        raise _Layout(at)
    return scores


def _best(
    scores: np.ndarray, usable: np.ndarray | None, k: int, noise: bool
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(the k best rows' positions, best first; the scores with the rows no search may
    answer with at -inf; the noise's median and spread)."""
    # A zero vector (text the model has no tokens for) matches nothing.
    nonzero = scores != 0.0
    median, spread = _noise(scores[nonzero]) if noise else (0.0, 0.0)
    if usable is not None:
        nonzero &= usable
    scores = np.where(nonzero, scores, -np.inf)
    k = min(k, len(scores))
    if k <= 0:
        return np.empty(0, dtype=np.intp), scores, median, spread
    # The k best, the earlier row first among equal scores (so the C module's selection,
    # vecscan.scan, picks the same rows where scores tie across the k-th place).
    kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
    near = (
        np.flatnonzero(scores >= kth) if np.isfinite(kth) else np.flatnonzero(np.isfinite(scores))
    )
    top = near[np.lexsort((near, -scores[near]))][:k]
    return top[np.isfinite(scores[top])], scores, median, spread


def _noise(scores: np.ndarray) -> tuple[float, float]:
    """Median and robust spread of a query's cosines: most chunks are unrelated to any
    query, so these describe what "no relation" looks like for this query and model."""
    if scores.size == 0:
        return 0.0, 0.0
    median = _median(scores)
    spread = MAD_TO_SIGMA * _median(np.abs(scores - median))
    return median, spread


def _median(values: np.ndarray) -> float:
    """np.median's value, from one partition around the middle: np.median partitions
    around two points for an even count, 7x slower (0.24 against 0.03 ms on 34k cosines)."""
    k = values.size // 2
    part = np.partition(values, k)
    if values.size % 2:
        return float(part[k])
    return float((part[:k].max() + part[k]) / 2)
