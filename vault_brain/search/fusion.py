"""Fusions: how the arms' ranked lists become one. A registry keyed by the config name
(`search.fusion`); each takes the arms' results and returns fused hits, best first.

The default is chosen by measurement (docs/benchmarks.md): a convex combination of
min-max normalised scores (vector weight 0.4) has the best worst case over the question
and IR sets; RRF, and ranking by the calibrated evidence itself, did worse there. Fusion
only orders the hits: the score a caller sees is calibrated evidence (pipeline.calibrate)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vault_brain.config import SearchSettings
from vault_brain.search.base import ArmResult, NoteHit

Fuser = Callable[[Sequence[ArmResult], SearchSettings], list[NoteHit]]
FUSERS: dict[str, Fuser] = {}


def fuser(name: str) -> Callable[[Fuser], Fuser]:
    def register(fn: Fuser) -> Fuser:
        FUSERS[name] = fn
        return fn

    return register


def _weights(arms: Sequence[ArmResult], settings: SearchSettings) -> list[float]:
    w = settings.vector_weight
    return [w if arm.name == "vector" else 1.0 - w for arm in arms]


def _minmax(hits: Sequence[NoteHit]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return {h.note_rowid: 1.0 for h in hits}
    return {h.note_rowid: (h.score - lo) / (hi - lo) for h in hits}


def _snippet_chunks(arms: Sequence[ArmResult]) -> dict[int, int]:
    """The chunk each note's snippet comes from: the full-text one when there is one."""
    chunk: dict[int, int] = {}
    for arm in sorted(arms, key=lambda a: a.name == "fts"):
        chunk.update({h.note_rowid: h.chunk_rowid for h in arm.hits})
    return chunk


@fuser("convex")
def fuse_convex(arms: Sequence[ArmResult], settings: SearchSettings) -> list[NoteHit]:
    """score = Σ weight · minmax(arm score); a note missing from an arm gets 0 there."""
    chunk = _snippet_chunks(arms)
    normed = [_minmax(arm.hits) for arm in arms]
    weights = _weights(arms, settings)
    fused = [
        NoteHit(n, c, sum(w * norm.get(n, 0.0) for w, norm in zip(weights, normed, strict=True)))
        for n, c in chunk.items()
    ]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused


@fuser("rrf")
def fuse_rrf(arms: Sequence[ArmResult], settings: SearchSettings) -> list[NoteHit]:
    """Reciprocal Rank Fusion; weights (1-w, w) scaled so w = 0.5 is classic 1:1 RRF."""
    k = settings.rrf_k
    scores: dict[int, float] = {}
    chunk: dict[int, int] = {}
    for weight, arm in zip(_weights(arms, settings), arms, strict=True):
        for rank, h in enumerate(arm.hits, 1):
            scores[h.note_rowid] = scores.get(h.note_rowid, 0.0) + 2 * weight / (k + rank)
            chunk.setdefault(h.note_rowid, h.chunk_rowid)
    fused = [NoteHit(n, chunk[n], s) for n, s in scores.items()]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused
