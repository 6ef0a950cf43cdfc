"""The vector arm: the query embedded by the model that embedded the chunks, nearest
chunks by cosine. It steps aside (and says why) whenever it cannot answer well: no model,
vectors not built yet or of another model, or an endpoint that is failing or slow."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vault_brain.embed.base import Embedder, embed_queries
from vault_brain.endpoint import waiting_at_most
from vault_brain.errors import Unavailable
from vault_brain.index.port import VectorSearch
from vault_brain.index.records import INSTANT, STRONG
from vault_brain.search.base import ArmResult, LazyPool, Request, collapse
from vault_brain.search.calibration import bank_weight, fitted_scale, vector_evidence
from vault_brain.search.fit import bank_likeness, bank_matrix, stored_fit
from vault_brain.text.analysis import detect_language

if TYPE_CHECKING:
    from concurrent.futures import Future

    import numpy as np

    from vault_brain.embed.e5 import Cache

# A query embedding from a remote endpoint gets this long; then search answers from full
# text (and says so) instead of waiting out the endpoint's own 30 s timeout.
QUERY_DEADLINE_SECONDS = 2.0
# An in-process model, once loaded, gets this long for a query (it takes ~10 ms): only a
# broken or hostile model reaches it, and search then answers from full text.
LOCAL_QUERY_DEADLINE_SECONDS = 5.0
ENDPOINT_ERRORS = (Unavailable, OSError, ValueError, RuntimeError)


# The strong tier answers once it covers this share of the chunks; until then the instant
# tier does. The two are never mixed: a query vector meets only vectors of its own model.
STRONG_TAKEOVER = 0.99


@dataclass(frozen=True)
class _Ready:
    tier: str  # "instant" | "strong"
    embedder: Embedder
    backoff: object  # indexer.Backoff of the tier
    dim: int  # of the vectors the tier's table holds


class VectorArm:
    name = "vector"

    def __init__(
        self,
        embedder: Embedder | None,
        backoff: object,
        *,
        strong: Embedder | None = None,
        strong_backoff: object | None = None,
        cache: Cache | None = None,
    ) -> None:
        self.embedder = embedder
        self.cache = cache  # where the bank's vectors are kept (search/fit.py)
        self._banks: dict[str, np.ndarray] = {}
        self.backoff = backoff  # indexer.Backoff shared with the vector queue
        self.strong = strong
        self.strong_backoff = strong_backoff
        self._pool = LazyPool(2, "query-embed")
        # Query vectors an in-process model began before the search (preload), by (model
        # name, query): its own to read, once.
        self._early: dict[tuple[str, str], Future] = {}

    def tier(self, reads: VectorSearch) -> tuple[str, Embedder | None, object]:
        """Which tier answers now: the strong one when it covers the vault, else instant."""
        if self.strong is not None and not self.strong_backoff.waiting():  # type: ignore[union-attr]
            held = reads.vectors_model(STRONG)
            if held is not None and held[0] == self.strong.name:
                if reads.strong_covers(STRONG_TAKEOVER):
                    return STRONG, self.strong, self.strong_backoff
        return INSTANT, self.embedder, self.backoff

    def _ready(self, reads: VectorSearch) -> _Ready | str:
        """The tier that answers now and what it needs, or why the arm steps aside."""
        tier_name, embedder, backoff = self.tier(reads)
        if embedder is None:
            return "no embedding provider configured"
        held = reads.vectors_model(tier_name)
        if held is None or held[0] != embedder.name:
            return "vectors are not built yet"
        if backoff.waiting():  # type: ignore[attr-defined]
            # The vector queue saw the endpoint fail: no search waits on it meanwhile.
            return "embedding endpoint unavailable; retrying in the background"
        return _Ready(tier_name, embedder, backoff, held[1])

    def begin(self, reads: VectorSearch, request: Request) -> None:
        """Ask a remote endpoint for the query's vector while the full-text arm ranks
        (hybrid): the wait for the network then costs no wall time of its own.

        An in-process model is not started early: on 2 cores, e5 in a thread beside the
        full-text arm made that arm 4.4 ms slower on cpp-docs (8.6 against 4.2 ms; running
        only the graph on the thread, with no GIL held, as slow), so a search took 15.5 ms
        at p50 against 14.1 ms one arm after the other. (On the 173-note Obsidian vault the
        overlap won, 5.2 against 6.2 ms; the default follows the worst case.)"""
        ready = self._ready(reads)
        if isinstance(ready, _Ready) and getattr(ready.embedder, "remote", False):
            future = self._pool.submit(_query_vectors, ready.embedder, [request.query])
            request.begun[self.name] = (ready, future)

    def preload(self, reads: VectorSearch, query: str, *, anyway: bool = False) -> bool:
        """A one-shot search about to bring the index in step (its stat pass, the full-text
        arm): load the in-process model that will answer and embed the query on a pool
        thread meanwhile, so the model's start (imports, session, tokenizer: ~150 CPU-ms
        with e5) overlaps that work on a second core. Begun only when a core looks spare
        (spare_core; `anyway`: regardless), since on a busy machine the two threads share
        one core and gain nothing. A failure here is not reported: retrieve() loads the
        model again and fails as it would have. Returns whether it began."""
        if not (anyway or spare_core()):
            return False
        ready = self._ready(reads)
        if not isinstance(ready, _Ready) or getattr(ready.embedder, "remote", False):
            return False
        if getattr(ready.embedder, "load", None) is None:
            return False  # a model with no load of its own embeds in a moment
        key = (ready.embedder.name, query)
        if key not in self._early:
            self._early[key] = self._pool.submit(_loaded_query_vectors, ready.embedder, query)
        return True

    def retrieve(self, reads: VectorSearch, request: Request) -> ArmResult:
        ready, future = request.begun.get(self.name) or (self._ready(reads), None)
        if isinstance(ready, str):
            return self._aside(ready)
        embedder = ready.embedder
        try:
            vector = self._embed(embedder, request.query, future)
        except TimeoutError:  # concurrent.futures' TimeoutError is this one (3.11+)
            ready.backoff.failed()  # type: ignore[attr-defined]
            return self._aside("embedding endpoint too slow; full text only")
        except ENDPOINT_ERRORS as exc:
            ready.backoff.failed()  # type: ignore[attr-defined]
            return self._aside(f"embedding failed: {exc}"[:200])
        if len(vector) != ready.dim:
            return self._aside("embedding dimension changed; vectors are being rebuilt")
        if not vector.any():
            return ArmResult(self.name, [])  # the model knows none of the query's words
        scale, notes = self._scale(reads, ready.tier, embedder, request.query)
        calibrated = scale is not None and (
            notes is not None or bool(getattr(embedder, "cosine_scale_measured", False))
        )
        # With the vault's fit, cosines are read on its scale: on a small vault, less a share
        # of the question's likeness to the bank of everyday questions (search/fit.py).
        weight = bank_weight(notes) if notes is not None else 0.0
        likeness = 0.0
        if weight > 0.0:
            try:
                likeness = bank_likeness(self._bank(embedder), vector)
            except ENDPOINT_ERRORS:  # the bank could not be embedded: the model's own scale
                scale = getattr(embedder, "cosine_scale", None)
                calibrated = bool(getattr(embedder, "cosine_scale_measured", False))
                weight = 0.0
        found = reads.nearest_chunks(
            embedder.name,
            vector,
            request.filters,
            k=request.depth,
            tier=ready.tier,
            noise=scale is None,
        )
        hits = collapse(found.hits)
        evidence = {
            h.note_rowid: vector_evidence(
                h.score - weight * likeness,
                found.median,
                found.spread,
                scale,
            )
            for h in hits
        }
        return ArmResult(self.name, hits, tier=ready.tier, evidence=evidence, calibrated=calibrated)

    def _scale(
        self, reads: VectorSearch, tier: str, embedder: Embedder, query: str
    ) -> tuple[tuple[float, float] | None, int | None]:
        """(cosine scale, the fitted vault's note count) for this query: the vault's own fit
        in the query's language (search/fit.py) when the index holds one for this model,
        else the model's declared scale (count None), else none (the query's noise then
        decides)."""
        fit = stored_fit(reads, tier)
        if fit is not None and fit.model == embedder.name:
            # A short question's words may not say its language ("recette de la blanquette
            # de veau" reads as English): then it is taken to be in the vault's main one.
            # Measured: 3 more of 40 plain off-topic caught on Obsidian fr + de, none lost.
            _, main = reads.vault_languages()
            language = detect_language(query, default=main)
            return fitted_scale(fit.floor(language)), fit.notes
        return getattr(embedder, "cosine_scale", None), None

    def _bank(self, embedder: Embedder) -> np.ndarray:
        """The bank's vectors by this model, loaded once per process (from the cache the
        fit filled; embedded here only when it is gone, e.g. a fit made on another host)."""
        bank = self._banks.get(embedder.name)
        if bank is None:
            bank = self._banks[embedder.name] = bank_matrix(embedder, self.cache)
        return bank

    def _embed(self, embedder: Embedder, query: str, future: Future | None) -> np.ndarray:
        """The query's vector: in this thread, or from a remote endpoint (begun already or
        asked now) within a deadline."""
        deadline = QUERY_DEADLINE_SECONDS
        if future is None:
            early = self._early.pop((embedder.name, query), None)
            if not getattr(embedder, "remote", False):
                load = getattr(embedder, "load", None)
                if load is None:
                    return embed_queries(embedder, [query])[0]
                # The first load builds and checks the model: not a query's time. Begun by
                # preload, this waits for it; failed there, it fails here as it would have.
                load()
                deadline = LOCAL_QUERY_DEADLINE_SECONDS
            future = early or self._pool.submit(_query_vectors, embedder, [query])
        return future.result(timeout=deadline)[0]

    def _aside(self, reason: str) -> ArmResult:
        return ArmResult(self.name, [], degraded=reason)

    def close(self) -> None:
        self._pool.close()


def spare_core() -> bool:
    """Whether this process may count on a second core now: two or more it may run on, and
    a load average (the last minute's) that leaves one free. A rough guess on the safe side:
    a machine busy for less than a minute may still look idle, and the early load then
    costs a little CPU and gains nothing (docs/benchmarks.md, "The first search, round 7")."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows: no load average
        return False
    return cores >= 2 and load <= cores - 1


def _loaded_query_vectors(embedder: Embedder, query: str) -> np.ndarray:
    """In a pool thread, for preload: the model loaded, then the query's vector."""
    embedder.load()  # type: ignore[attr-defined]
    return _query_vectors(embedder, [query])


def _query_vectors(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """In a pool thread: the request itself ends at the deadline too, so no thread is left
    waiting on a hung endpoint (a CLI process would wait for it at exit, 30 s)."""
    with waiting_at_most(QUERY_DEADLINE_SECONDS):
        return embed_queries(embedder, texts)
