"""The search pipeline: arms retrieve → a fusion merges → hits are hydrated.

All of it runs on one read snapshot of the index. Adding an arm or a reranker is one new
file and one line here; the fusion comes from the registry by config name."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vault_brain import log
from vault_brain.config import SearchSettings
from vault_brain.index.db import SqliteIndex
from vault_brain.index.records import Filters
from vault_brain.index.store import Reads
from vault_brain.index.text import query_terms
from vault_brain.records import Hit
from vault_brain.search.base import Arm, ArmResult, NoteHit, Request
from vault_brain.search.fusion import FUSERS
from vault_brain.search.snippets import make_snippet

# Which arms each mode runs; a mode whose arms all step aside falls back to full text.
MODE_ARMS = {"hybrid": ("fts", "vector"), "fts": ("fts",), "vector": ("vector",)}


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    degraded: bool
    reason: str | None
    vector_tier: str | None = None


class SearchPipeline:
    def __init__(self, index: SqliteIndex, settings: SearchSettings, arms: Sequence[Arm]) -> None:
        self.index = index
        self.settings = settings
        self.arms = {arm.name: arm for arm in arms}

    def run(
        self, query: str, *, mode: str, limit: int, filters: Filters, explain: bool = False
    ) -> Found:
        started = time.perf_counter()
        depth = max(limit * 5, 50) * 3  # candidate chunks per arm
        request = Request(query, filters, depth)
        with self.index.read() as reads:
            results = [self.arms[name].retrieve(reads, request) for name in MODE_ARMS[mode]]
            reasons = [r.degraded for r in results if r.degraded]
            answered = [r for r in results if not r.degraded]
            if not answered:  # vector mode with no usable vectors: full text instead
                answered = [self.arms["fts"].retrieve(reads, request)]
            fused = self._fuse(answered)
            hits = self._hydrate(reads, fused[:limit], query, answered if explain else None)
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

    def _fuse(self, results: list[ArmResult]) -> list[NoteHit]:
        live = [r for r in results if r.hits]
        if len(live) <= 1:
            return list(live[0].hits) if live else []
        return FUSERS[self.settings.fusion](live, self.settings)

    def _hydrate(
        self,
        reads: Reads,
        fused: Sequence[NoteHit],
        query: str,
        arms: list[ArmResult] | None,
    ) -> list[Hit]:
        infos = reads.notes_by_rowids([h.note_rowid for h in fused])
        texts = reads.chunk_texts([h.chunk_rowid for h in fused])
        terms = query_terms(query)
        explained = _explain(arms) if arms is not None else {}
        out = []
        for h in fused:
            info = infos.get(h.note_rowid)
            if info is None:
                continue
            _, text = texts.get(h.chunk_rowid, ("", ""))
            detail = None
            if arms is not None:
                detail = {**explained.get(h.note_rowid, {}), "fused": round(h.score, 4)}
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
                )
            )
        return out


def _explain(arms: list[ArmResult]) -> dict[int, dict[str, Any]]:
    """Per note: each arm's rank (1 = best) and raw score."""
    out: dict[int, dict[str, Any]] = {}
    for arm in arms:
        for rank, h in enumerate(arm.hits, 1):
            out.setdefault(h.note_rowid, {})[arm.name] = {"rank": rank, "score": round(h.score, 4)}
    return out
