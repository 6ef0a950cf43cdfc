"""The vector arm: the query embedded by the model that embedded the chunks, nearest
chunks by cosine. It steps aside (and says why) whenever it cannot answer well: no model,
vectors not built yet or of another model, or an endpoint that is failing or slow."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

from vault_brain.embed.base import Embedder, embed_queries
from vault_brain.errors import Unavailable
from vault_brain.index.store import TIERS, Reads
from vault_brain.search.base import ArmResult, Request, collapse
from vault_brain.search.calibration import vector_evidence

if TYPE_CHECKING:
    import numpy as np

# A query embedding from a remote endpoint gets this long; then search answers from full
# text (and says so) instead of waiting out the endpoint's own 30 s timeout.
QUERY_DEADLINE_SECONDS = 2.0
ENDPOINT_ERRORS = (Unavailable, OSError, ValueError, RuntimeError)


# The strong tier answers once it covers this share of the chunks; until then the instant
# tier does. The two are never mixed: a query vector meets only vectors of its own model.
STRONG_TAKEOVER = 0.99


class VectorArm:
    name = "vector"

    def __init__(
        self,
        embedder: Embedder | None,
        backoff: object,
        *,
        strong: Embedder | None = None,
        strong_backoff: object | None = None,
    ) -> None:
        self.embedder = embedder
        self.backoff = backoff  # indexer.Backoff shared with the vector queue
        self.strong = strong
        self.strong_backoff = strong_backoff
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-embed")

    def tier(self, reads: Reads) -> tuple[str, Embedder | None, object]:
        """Which tier answers now: the strong one when it covers the vault, else instant."""
        if self.strong is not None and not self.strong_backoff.waiting():  # type: ignore[union-attr]
            held = reads.vectors_model(TIERS["strong"])
            if held is not None and held[0] == self.strong.name:
                counts = reads.counts()
                if counts.chunks and counts.strong_vectors >= STRONG_TAKEOVER * counts.chunks:
                    return "strong", self.strong, self.strong_backoff
        return "instant", self.embedder, self.backoff

    def retrieve(self, reads: Reads, request: Request) -> ArmResult:
        tier_name, embedder, backoff = self.tier(reads)
        if embedder is None:
            return self._aside("no embedding provider configured")
        tier = TIERS[tier_name]
        held = reads.vectors_model(tier)
        if held is None or held[0] != embedder.name:
            return self._aside("vectors are not built yet")
        self_backoff = backoff
        if self_backoff.waiting():  # type: ignore[attr-defined]
            # The vector queue saw the endpoint fail: no search waits on it meanwhile.
            return self._aside("embedding endpoint unavailable; retrying in the background")
        try:
            vector = self._embed(embedder, request.query)
        except FutureTimeout:
            self_backoff.failed()  # type: ignore[attr-defined]
            return self._aside("embedding endpoint too slow; full text only")
        except ENDPOINT_ERRORS as exc:
            self_backoff.failed()  # type: ignore[attr-defined]
            return self._aside(f"embedding failed: {exc}"[:200])
        if len(vector) != held[1]:
            return self._aside("embedding dimension changed; vectors are being rebuilt")
        if not vector.any():
            return ArmResult(self.name, [])  # the model knows none of the query's words
        scale = getattr(embedder, "cosine_scale", None)
        found = reads.search_vectors(
            embedder.name, vector, request.filters, request.depth, tier, noise=scale is None
        )
        hits = collapse(found.hits)
        evidence = {
            h.note_rowid: vector_evidence(h.score, found.median, found.spread, scale) for h in hits
        }
        return ArmResult(
            self.name,
            hits,
            tier=tier_name,
            evidence=evidence,
            calibrated=bool(getattr(embedder, "cosine_scale_measured", False)),
        )

    def _embed(self, embedder: Embedder, query: str) -> np.ndarray:
        if not getattr(embedder, "remote", False):
            return embed_queries(embedder, [query])[0]
        future = self._pool.submit(embed_queries, embedder, [query])
        return future.result(timeout=QUERY_DEADLINE_SECONDS)[0]

    def _aside(self, reason: str) -> ArmResult:
        return ArmResult(self.name, [], degraded=reason)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
