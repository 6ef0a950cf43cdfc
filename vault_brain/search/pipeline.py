"""The search pipeline: arms retrieve → a fusion merges → hits are hydrated.

All of it runs on one read snapshot of the index. Adding an arm or a reranker is one new
file and one line here; the fusion comes from the registry by config name."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vault_brain import log
from vault_brain.config import SearchSettings
from vault_brain.index.port import Hydration, Index, Reads
from vault_brain.index.records import Filters
from vault_brain.records import Hit
from vault_brain.search.base import Arm, ArmResult, LazyPool, NoteHit, Request
from vault_brain.search.calibration import confidence, text_evidence
from vault_brain.search.fusion import FUSERS
from vault_brain.search.snippets import make_snippet
from vault_brain.text.analysis import query_terms

# Which arms each mode runs; a mode whose arms all step aside falls back to full text.
MODE_ARMS = {"hybrid": ("fts", "vector"), "fts": ("fts",), "vector": ("vector",)}


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    degraded: bool
    reason: str | None
    vector_tier: str | None = None


class SearchPipeline:
    def __init__(self, index: Index, settings: SearchSettings, arms: Sequence[Arm]) -> None:
        self.index = index
        self.settings = settings
        self.arms = {arm.name: arm for arm in arms}
        self._threads = LazyPool(4, "search-arm")  # Index.beside's arm thread

    def run(
        self,
        query: str,
        *,
        mode: str,
        limit: int,
        filters: Filters,
        explain: bool = False,
        light: bool = False,
    ) -> Found:
        started = time.perf_counter()
        request = self.request(query, limit=limit, filters=filters, light=light)
        with self.index.read() as reads:
            arms = [self.arms[name] for name in MODE_ARMS[mode]]
            if len(arms) > 1:
                for arm in arms:
                    begin = getattr(arm, "begin", None)
                    if begin is not None:
                        begin(reads, request)
            results = self._retrieve(arms, reads, request)
            reasons = [r.degraded for r in results if r.degraded]
            answered = [r for r in results if not r.degraded]
            if not answered:  # vector mode with no usable vectors: full text instead
                answered = [self.arms["fts"].retrieve(reads, request)]
            fused = self._fuse(answered)[:limit]
            scored = calibrate(fused, answered)
            hits = self._hydrate(reads, scored, query, answered if explain else None, fused)
        log.event(
            "search",
            mode=mode,
            results=len(hits),
            degraded=bool(reasons),
            query=log.cut(query),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
        tier = next((r.tier for r in answered if r.tier), None)
        return Found(hits, bool(reasons), reasons[0] if reasons else None, tier)

    def request(self, query: str, *, limit: int, filters: Filters, light: bool) -> Request:
        """What each arm is asked for a search of `limit` hits (run's)."""
        depth = max(self.settings.candidates, limit * 15)  # candidate chunks per arm
        return Request(query, filters, depth, light=light)

    def _retrieve(self, arms: list[Arm], reads: Reads, request: Request) -> list[ArmResult]:
        """Each arm's answer. With two arms and a second read on the same snapshot
        (Index.beside: Postgres), the last arm runs on it in a thread while the first
        runs here, so the server works on both at once; otherwise one after the other."""
        if len(arms) < 2:
            return [arm.retrieve(reads, request) for arm in arms]
        with self.index.beside(reads) as side:
            if side is None:
                return [arm.retrieve(reads, request) for arm in arms]
            later = self._threads.submit(arms[-1].retrieve, side, request)
            try:
                first = [arm.retrieve(reads, request) for arm in arms[:-1]]
            finally:
                later.exception()  # waits: the side read ends only once its arm is done
            return [*first, later.result()]

    def _fuse(self, results: list[ArmResult]) -> list[NoteHit]:
        """The order: the fusion's (an arm alone keeps its own order)."""
        live = [r for r in results if r.hits]
        if not live:
            return []
        if len(live) == 1:
            return list(live[0].hits)
        return FUSERS[self.settings.fusion](live, self.settings)

    def _hydrate(
        self,
        reads: Hydration,
        fused: Sequence[NoteHit],
        query: str,
        arms: list[ArmResult] | None,
        fused_order: Sequence[NoteHit] = (),
    ) -> list[Hit]:
        infos = reads.notes_by_rowids([h.note_rowid for h in fused])
        texts = reads.chunk_texts([h.chunk_rowid for h in fused])
        terms = query_terms(query)
        explained = _explain(arms, fused_order) if arms is not None else {}
        out = []
        for h in fused:
            info = infos.get(h.note_rowid)
            if info is None:
                continue
            _, text = texts.get(h.chunk_rowid, ("", ""))
            detail = None
            if arms is not None:
                detail = {**explained.get(h.note_rowid, {}), "score": round(h.score, 4)}
            out.append(
                Hit(
                    info.id,
                    info.title,
                    info.path,
                    info.summary,
                    make_snippet(text, terms),
                    round(h.score, 4),
                    info.updated,
                    detail,
                    confidence(h.score),
                )
            )
        return out


def calibrate(fused: Sequence[NoteHit], arms: Sequence[ArmResult]) -> list[NoteHit]:
    """The score a caller sees: each hit's calibrated evidence (search/calibration.py) —
    the arms' evidence combined as independent signs (1 - Π (1 - e)) — kept in the
    fusion's order and never rising down the list (a hit scores at least what the best
    hit below it scores), so scores mean the same in every query and mode and a cut-off
    keeps everything above the last hit that passes."""
    vectors_decide = any(arm.name == "vector" and arm.calibrated and arm.hits for arm in arms)

    def of(arm: ArmResult, note: int) -> float:
        value = arm.evidence.get(note, 0.0)
        if arm.name == "fts":
            return text_evidence(value, vectors_decide=vectors_decide)
        return min(1.0, value)

    evidence = [1.0 - math.prod(1.0 - of(arm, h.note_rowid) for arm in arms) for h in fused]
    out: list[NoteHit] = []
    floor = 0.0
    for h, e in zip(reversed(fused), reversed(evidence), strict=True):
        floor = max(floor, e)
        out.append(NoteHit(h.note_rowid, h.chunk_rowid, floor))
    out.reverse()
    return out


def _explain(arms: list[ArmResult], fused: Sequence[NoteHit]) -> dict[int, dict[str, Any]]:
    """Per note: each arm's rank (1 = best), raw score and calibrated evidence, and the
    fusion's own score."""
    out: dict[int, dict[str, Any]] = {}
    for arm in arms:
        for rank, h in enumerate(arm.hits, 1):
            detail: dict[str, Any] = {"rank": rank, "score": round(h.score, 4)}
            if h.note_rowid in arm.evidence:
                detail["evidence"] = round(arm.evidence[h.note_rowid], 4)
            out.setdefault(h.note_rowid, {})[arm.name] = detail
    for h in fused:
        out.setdefault(h.note_rowid, {})["fusion"] = round(h.score, 4)
    return out
