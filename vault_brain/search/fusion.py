"""Fusions: how the arms' ranked lists become one. A registry keyed by the config name
(`search.fusion`); each takes the arms' results and returns fused hits, best first.

The default is chosen by measurement (docs/benchmarks.md): "adaptive", a convex
combination of min-max normalised scores (vector weight 0.4) that leans on the vectors
when the question's words are not in the notes, has the best worst case over the question
sets, the evaluation sets (small and cross-language vaults among them) and the IR sets; plain
convex gave a cross-language vault half the vector arm's nDCG, and RRF or ranking by the
calibrated evidence itself did worse. Fusion only orders the hits: the score a caller sees
is calibrated evidence (pipeline.calibrate)."""

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


# Under this coverage of the question by its best full-text note, the vectors take over the
# order, fully at coverage 0 (a question in another language than every note).
ADAPTIVE_COVERAGE = 0.15


@fuser("adaptive")
def fuse_adaptive(arms: Sequence[ArmResult], settings: SearchSettings) -> list[NoteHit]:
    """Convex, with the full-text arm weighted by how much of the question its best note
    holds (its calibrated coverage): a question whose words the notes lack (asked in
    another language than the notes, or in other words) leans on the vectors, instead of
    giving 1 - w of the order to notes that share a stray word with it."""
    text = next((a for a in arms if a.name == "fts"), None)
    coverage = max(text.evidence.values(), default=0.0) if text is not None else 1.0
    w = settings.vector_weight
    short = max(0.0, ADAPTIVE_COVERAGE - coverage) / ADAPTIVE_COVERAGE  # 0 at or above it
    adapted = w + (1.0 - w) * short
    chunk = _snippet_chunks(arms)
    normed = [_minmax(arm.hits) for arm in arms]
    weights = [adapted if arm.name == "vector" else 1.0 - adapted for arm in arms]
    fused = [
        NoteHit(n, c, sum(wt * norm.get(n, 0.0) for wt, norm in zip(weights, normed, strict=True)))
        for n, c in chunk.items()
    ]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused
