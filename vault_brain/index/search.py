"""Hybrid search: a full-text arm and a vector arm over chunks, collapsed to notes, fused.

Fusion is chosen by measurement (docs/benchmarks.md): a convex combination of min-max
normalised scores keeps full text's quality when the vector arm is weak, where plain RRF
can drag it down; RRF stays available."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vault_brain.index.store import ChunkHit


@dataclass(frozen=True)
class NoteHit:
    note_rowid: int
    chunk_rowid: int  # the chunk that gives the snippet
    score: float


def collapse(hits: Sequence[ChunkHit]) -> list[NoteHit]:
    """Best chunk per note, in the order given (best first)."""
    seen: dict[int, NoteHit] = {}
    for h in hits:
        if h.note_rowid not in seen:
            seen[h.note_rowid] = NoteHit(h.note_rowid, h.chunk_rowid, h.score)
    return list(seen.values())


def _minmax(hits: Sequence[NoteHit]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return {h.note_rowid: 1.0 for h in hits}
    return {h.note_rowid: (h.score - lo) / (hi - lo) for h in hits}


def fuse_convex(
    fts: Sequence[NoteHit], vec: Sequence[NoteHit], vector_weight: float
) -> list[NoteHit]:
    """score = (1 - w) · minmax(fts) + w · minmax(cosine); a note missing from an arm gets 0
    there. The snippet comes from the full-text chunk when there is one."""
    f, v = _minmax(fts), _minmax(vec)
    chunk = {h.note_rowid: h.chunk_rowid for h in vec}
    chunk.update({h.note_rowid: h.chunk_rowid for h in fts})
    fused = [
        NoteHit(n, chunk[n], (1 - vector_weight) * f.get(n, 0.0) + vector_weight * v.get(n, 0.0))
        for n in chunk
    ]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused


def fuse_rrf(
    fts: Sequence[NoteHit], vec: Sequence[NoteHit], k: int, vector_weight: float = 0.5
) -> list[NoteHit]:
    """Reciprocal Rank Fusion; weights (1-w, w) scaled so w = 0.5 is classic 1:1 RRF."""
    scores: dict[int, float] = {}
    chunk: dict[int, int] = {}
    for weight, hits in ((2 * (1 - vector_weight), fts), (2 * vector_weight, vec)):
        for rank, h in enumerate(hits, 1):
            scores[h.note_rowid] = scores.get(h.note_rowid, 0.0) + weight / (k + rank)
            chunk.setdefault(h.note_rowid, h.chunk_rowid)
    fused = [NoteHit(n, chunk[n], s) for n, s in scores.items()]
    fused.sort(key=lambda h: (-h.score, h.note_rowid))
    return fused


# --- snippets -------------------------------------------------------------------------

_MARKUP = [
    (re.compile(r"```.*?```", re.S), " "),
    (re.compile(r"!\[\[[^\]]*\]\]"), " "),
    (re.compile(r"\[\[([^\]|#]*)(?:#[^\]|]*)?\|([^\]]*)\]\]"), r"\2"),
    (re.compile(r"\[\[([^\]|#]*)(?:#([^\]|]*))?\]\]"), r"\1"),
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), " "),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"^\s{0,3}#{1,6}\s+", re.M), ""),
    (re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?", re.M), ""),
    (re.compile(r"[*_`~>|]+"), " "),
    (re.compile(r"\s+"), " "),
]


def plain_text(markdown: str) -> str:
    text = markdown
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text.strip()


def make_snippet(text: str, terms: Sequence[str], max_chars: int = 240) -> str:
    """A window of plain text around the first query term found (else the start)."""
    plain = plain_text(text)
    if len(plain) <= max_chars:
        return plain
    lower = plain.lower()
    pos = -1
    for term in terms:
        t = term.lower()
        for probe in (t, t[:5] if len(t) > 5 else None):
            if probe:
                p = lower.find(probe)
                if p >= 0 and (pos < 0 or p < pos):
                    pos = p
                    break
    start = 0 if pos < 0 else max(0, pos - max_chars // 3)
    if start > 0:
        space = plain.find(" ", start)
        if 0 <= space < start + 20:
            start = space + 1
    end = start + max_chars - (1 if start else 0) - 1
    snippet = plain[start:end]
    if end < len(plain):
        cut = snippet.rfind(" ")
        if cut > len(snippet) * 0.7:
            snippet = snippet[:cut]
        snippet += "…"
    return ("…" + snippet) if start else snippet
