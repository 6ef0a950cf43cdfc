"""The vector arm: the query embedded by the model that embedded the chunks, nearest
chunks by cosine. It steps aside (and says why) whenever it cannot answer well: no model,
vectors not built yet or of another model, or an endpoint that is failing or slow."""

from __future__ import annotations

import json
import struct
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vault_brain.embed.base import Embedder, embed_queries, query_vector
from vault_brain.embed.early import Early, EarlyFailed, can_fork
from vault_brain.endpoint import waiting_at_most
from vault_brain.errors import Unavailable
from vault_brain.index.port import Index, VectorSearch
from vault_brain.index.records import INSTANT, STRONG, Filters
from vault_brain.search.base import ArmResult, LazyPool, NoteHit, Request, collapse
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


# The strong tier answers alone once it covers this share of the chunks. A query vector
# meets only vectors of its own model: when two tiers answer, each is asked with its own.
STRONG_TAKEOVER = 0.99
# Before that, once the vault has a fit for the strong vectors present (search/fit.py: the
# Indexer fits them when every note's lead chunk is in, index/leads.py, and again as they
# cover more), PARTIAL_RULE says who answers: "mean" (both tiers, a note scoring the mean
# of its two min-max normalised scores: with full text, a three-way convex fusion), "max"
# (both, the best of the two), "strong" (the strong tier alone) or "instant" (the instant
# tier alone, as before). PARTIAL_EVIDENCE is the cut-off's vector evidence when both
# answer: "strong" (the strong tier's, on its fit), "max" or "mean" of the two tiers'.
# Measured on cpp-docs and Obsidian Help in 8 languages at every lead in and at 60 % of the
# chunks (bench/takeover.py; docs/benchmarks.md, "Answers before full coverage, round 7"):
# "mean" is the one rule never under the instant tier's nDCG@10 on any set's dev part (worst
# +0.008 and +0.001; "strong" -0.004 and -0.007, "max" +0.020 and -0.012), and the instant
# tier's evidence lets off-topic questions through on French and German vaults (8 of 12
# caught on obsidian-fr where the strong tier's catches 12 of 12).
PARTIAL_RULE = "mean"
PARTIAL_EVIDENCE = "strong"
BOTH = "instant+strong"  # ArmResult.tier when both tiers answered


@dataclass(frozen=True)
class _Ready:
    tier: str  # "instant" | "strong"
    embedder: Embedder
    backoff: object  # indexer.Backoff of the tier
    dim: int  # of the vectors the tier's table holds


@dataclass(frozen=True)
class _EarlyArm:
    """The arm's answer to `request`, begun in a forked child (begin_early)."""

    request: Request
    mark: object  # the index's change_mark() before the fork
    mark_now: Callable[[], object]
    child: Early


class _GiveUp(Exception):
    """In the child: an embedding failed. The child gives no answer, and this process
    embeds (and backs the model off, and says so) as it would have."""


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
        self._early: _EarlyArm | None = None
        self._given: dict[str, np.ndarray] = {}  # the query's vectors a child made, by model
        self._made: dict[str, np.ndarray] | None = None  # in the child: the vectors it makes

    def tiers(self, reads: VectorSearch) -> tuple[str, ...]:
        """The tiers that answer now: the strong one alone when it covers the vault; both,
        or the strong one, when it has a fit for the vectors it holds and PARTIAL_RULE says
        so; else the instant one."""
        if self.strong is not None and not self.strong_backoff.waiting():  # type: ignore[union-attr]
            held = reads.vectors_model(STRONG)
            if held is not None and held[0] == self.strong.name:
                if reads.strong_covers(STRONG_TAKEOVER):
                    return (STRONG,)
                if PARTIAL_RULE != "instant":
                    fit = stored_fit(reads, STRONG)
                    if fit is not None and fit.model == self.strong.name:
                        return (STRONG,) if PARTIAL_RULE == "strong" else (INSTANT, STRONG)
        return (INSTANT,)

    def tier(self, reads: VectorSearch) -> tuple[str, Embedder | None, object]:
        """The one tier whose vectors stand for the vault (related notes): the strong one
        when it answers alone, else instant."""
        if self.tiers(reads) == (STRONG,):
            return STRONG, self.strong, self.strong_backoff
        return INSTANT, self.embedder, self.backoff

    def early_wanted(self, reads: VectorSearch) -> bool:
        """Whether a one-shot CLI search may have this arm's answer made by a forked child
        (begin_early): every tier that will answer has an in-process model, not loaded
        here yet, and a second core may run the child."""
        for name in self.tiers(reads):
            embedder = self.strong if name == STRONG else self.embedder
            if embedder is None or getattr(embedder, "remote", False):
                return False
            if getattr(embedder, "light_loaded", getattr(embedder, "loaded", True)):
                return False
        return can_fork()

    def begin_early(self, index: Index, request: Request, early: Early | None = None) -> None:
        """This arm's whole answer to `request`, made in a forked child (embed/early.py):
        the query's vectors by the light encoders, the KNN on a connection of the child's
        own, the calibration; what `retrieve` then takes instead of working here, so a
        one-shot search never imports numpy in this process. `early`: a child forked
        already, before this process opened the index (oneshot.py: it imported numpy and
        loaded the models meanwhile), told the request now; else one is forked now.
        Called outside any read of the index, before this process's own work on the
        search (the stat pass, the full-text arm). Nothing when the index cannot tell
        whether it changed meanwhile (Index.change_mark)."""
        self.discard_early()
        mark = index.change_mark()  # before the child reads: it reads once told, below
        if mark is None:
            if early is not None:
                early.discard()
            return
        if early is None:
            early = Early(lambda told: self.answer_elsewhere(index.read_elsewhere, told))
        early.tell(_encode_request(request))
        self._early = _EarlyArm(request, mark, index.change_mark, early)

    def answer_elsewhere(
        self, read: Callable[[], AbstractContextManager[VectorSearch]], told: Callable[[], bytes]
    ) -> bytes:
        """In a forked child: this arm's answer to the request its parent tells, on a read
        of the child's own connection, for _early_answer."""
        request = _decode_request(told())
        self._made = {}
        with read() as reads:
            ready = self._ready(reads)
            if isinstance(ready, str):
                return _encode_answer(ready, self._aside(ready), {})
            return _encode_answer(ready, self._answer(reads, request, ready), self._made)

    def discard_early(self) -> None:
        early, self._early = self._early, None
        if early is not None:
            early.child.discard()

    def _early_answer(self, request: Request, ready: list[_Ready]) -> ArmResult | None:
        """The child's answer when it is this request's, on the tiers that answer here, and
        nobody committed to the index between the fork and now (so the child read the same
        data as this search's snapshot: Index.change_mark). Else None: the arm works here,
        on the child's query vectors when it made them."""
        early, self._early = self._early, None
        if early is None:
            return None
        if early.request != request:
            early.child.discard()
            return None
        try:
            answer = early.child.result()
            tiers, result, vectors = _decode_answer(answer)
        except (EarlyFailed, ValueError, KeyError, TypeError, IndexError):
            return None  # embedded here instead, as without it
        if tiers == _tiers_of(ready) and early.mark_now() == early.mark:
            return result
        try:
            self._given = _vectors_of(answer, vectors)
        except (ValueError, TypeError):
            pass  # embedded here
        return None

    def _ready(self, reads: VectorSearch) -> list[_Ready] | str:
        """The tiers that answer now and what each needs, or why the arm steps aside (a
        tier that cannot answer beside another leaves it alone)."""
        ready: list[_Ready] = []
        reason = ""
        for name in self.tiers(reads):
            one = self._ready_tier(reads, name)
            if isinstance(one, str):
                reason = reason or one
            else:
                ready.append(one)
        return ready or reason

    def _ready_tier(self, reads: VectorSearch, tier_name: str) -> _Ready | str:
        embedder, backoff = (
            (self.strong, self.strong_backoff)
            if tier_name == STRONG
            else (self.embedder, self.backoff)
        )
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
        if isinstance(ready, str):
            return
        futures = [
            self._pool.submit(_query_vectors, r.embedder, [request.query])
            if getattr(r.embedder, "remote", False)
            else None
            for r in ready
        ]
        if any(f is not None for f in futures):
            request.begun[self.name] = (ready, futures)

    def retrieve(self, reads: VectorSearch, request: Request) -> ArmResult:
        ready, futures = request.begun.get(self.name) or (self._ready(reads), None)
        if isinstance(ready, str):
            self.discard_early()
            return self._aside(ready)
        if futures is None and (early := self._early_answer(request, ready)) is not None:
            return early
        try:
            return self._answer(reads, request, ready, futures)
        finally:
            self._given = {}

    def _answer(
        self,
        reads: VectorSearch,
        request: Request,
        ready: list[_Ready],
        futures: list[Future | None] | None = None,
    ) -> ArmResult:
        results = [
            self._retrieve_tier(reads, request, r, futures[i] if futures else None)
            for i, r in enumerate(ready)
        ]
        if len(results) == 1:
            return results[0]
        return merge_tiers(results, PARTIAL_RULE, PARTIAL_EVIDENCE)

    def _retrieve_tier(
        self, reads: VectorSearch, request: Request, ready: _Ready, future: Future | None
    ) -> ArmResult:
        embedder = ready.embedder
        try:
            vector = self._embed(embedder, request.query, future, light=request.light)
        except TimeoutError:  # concurrent.futures' TimeoutError is this one (3.11+)
            ready.backoff.failed()  # type: ignore[attr-defined]
            return self._aside("embedding endpoint too slow; full text only")
        except ENDPOINT_ERRORS as exc:
            ready.backoff.failed()  # type: ignore[attr-defined]
            return self._aside(f"embedding failed: {exc}"[:200])
        if len(vector) != ready.dim:
            return self._aside("embedding dimension changed; vectors are being rebuilt")
        if not any(vector):
            return ArmResult(self.name, [], tier=ready.tier)  # the model knows none of the words
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

    def _embed(
        self, embedder: Embedder, query: str, future: Future | None, *, light: bool = False
    ) -> np.ndarray:
        """The query's vector (by the light encoder for a CLI search): in this thread, or
        from a remote endpoint (begun already or asked now) within a deadline."""
        deadline = QUERY_DEADLINE_SECONDS
        if future is None and (given := self._given.pop(embedder.name, None)) is not None:
            return given  # a child's, of this query by this model's light encoder
        if self._made is not None:  # in the child: at once, and any failure is the parent's
            try:
                vector = query_vector(embedder, query, light=light)
            except Exception as exc:
                raise _GiveUp(str(exc)) from exc
            self._made[embedder.name] = vector
            return vector
        if future is None:
            if not getattr(embedder, "remote", False):
                load = query_loader(embedder, light=light)
                if load is None:
                    return query_vector(embedder, query, light=light)
                load()  # the first load builds and checks the model: not a query's time
                deadline = LOCAL_QUERY_DEADLINE_SECONDS
            future = self._pool.submit(_query_vectors, embedder, [query], light)
        return future.result(timeout=deadline)[0]

    def _aside(self, reason: str) -> ArmResult:
        return ArmResult(self.name, [], degraded=reason)

    def close(self) -> None:
        self.discard_early()
        self._pool.close()


def query_loader(embedder: Embedder, *, light: bool) -> Callable[[], object] | None:
    """The load of what a query's vector needs (the light encoder's for a CLI search,
    where the model has one), or None for a model with nothing to load."""
    return (light and getattr(embedder, "load_light", None)) or getattr(embedder, "load", None)


# The child's answer on the pipe: a header's length, the header (JSON: Python's floats
# printed exactly, so the same doubles come back), then each query vector's raw bytes.
_HEADER = struct.Struct("<I")


def _encode_request(request: Request) -> bytes:
    f = request.filters
    fields = [request.query, [list(f.tags), f.folder, f.since, f.until], request.depth]
    return json.dumps([*fields, request.light]).encode()


def _decode_request(data: bytes) -> Request:
    query, (tags, folder, since, until), depth, light = json.loads(data)
    return Request(query, Filters(tuple(tags), folder, since, until), depth, light=light)


def _tiers_of(ready: list[_Ready] | str) -> list[list] | str:
    return ready if isinstance(ready, str) else [[r.tier, r.embedder.name, r.dim] for r in ready]


def _exact(value: float) -> float:
    """Only a Python float crosses as it is (a numpy scalar would print, round and add
    otherwise in the parent): anything else and the child gives no answer."""
    if type(value) is not float:
        raise TypeError(f"not a float: {type(value).__name__}")
    return value


def _encode_answer(
    ready: list[_Ready] | str, result: ArmResult, vectors: dict[str, np.ndarray]
) -> bytes:
    """In the child: the tiers that answered, the arm's result, the query's vectors."""
    arrays = {name: _layout(v) for name, v in vectors.items()}
    header = {
        "tiers": _tiers_of(ready),
        "name": result.name,
        "hits": [[int(h.note_rowid), int(h.chunk_rowid), _exact(h.score)] for h in result.hits],
        "degraded": result.degraded,
        "tier": result.tier,
        "evidence": [[int(n), _exact(e)] for n, e in result.evidence.items()],
        "calibrated": bool(result.calibrated),
        "vectors": [[name, dtype, shape] for name, (dtype, shape, _) in arrays.items()],
    }
    raw = json.dumps(header).encode()
    return b"".join([_HEADER.pack(len(raw)), raw, *(data for _, _, data in arrays.values())])


def _layout(vector: np.ndarray | array) -> tuple[str, list[int], bytes]:
    """(dtype, shape, bytes) of a query vector: an array('f') of e5's C encoder (made only
    on little-endian hosts, embed/e5_native.py) without numpy, else numpy's."""
    if isinstance(vector, array) and vector.typecode == "f":
        return "<f4", [len(vector)], vector.tobytes()
    import numpy as np

    a = np.ascontiguousarray(vector)
    return a.dtype.str, list(a.shape), a.tobytes()


def _decode_answer(data: bytes) -> tuple[list[list] | str, ArmResult, list[list]]:
    """In the parent, without numpy: (tiers, the arm's result, the vectors' layout)."""
    (size,) = _HEADER.unpack_from(data)
    header = json.loads(data[_HEADER.size : _HEADER.size + size])
    result = ArmResult(
        header["name"],
        [NoteHit(n, c, float(s)) for n, c, s in header["hits"]],
        degraded=header["degraded"],
        tier=header["tier"],
        evidence={n: float(e) for n, e in header["evidence"]},
        calibrated=header["calibrated"],
    )
    return header["tiers"], result, header["vectors"]


def _vectors_of(data: bytes, layout: list[list]) -> dict[str, np.ndarray]:
    """The child's query vectors, for this process to search with (numpy: needed then)."""
    import numpy as np

    (size,) = _HEADER.unpack_from(data)
    at = _HEADER.size + size
    out = {}
    for name, dtype, shape in layout:
        count = int(np.prod(shape))
        vector = np.frombuffer(data, dtype=np.dtype(dtype), count=count, offset=at)
        out[name] = vector.reshape(shape).copy()
        at += vector.nbytes
    return out


def merge_tiers(results: list[ArmResult], rule: str, evidence_rule: str = "strong") -> ArmResult:
    """Two tiers' answers as one vector arm's: each tier's scores min-max normalised (their
    cosines are on different scales), a note's score the mean ("mean", 0 where a tier lacks
    it) or the best ("max") of its two; its evidence the strong tier's (or the best or mean
    of the two, each read on its own tier's fit: PARTIAL_EVIDENCE); its snippet's chunk
    from the tier that scored it higher. A tier that could not answer leaves the other
    alone."""
    live = [r for r in results if not r.degraded]
    if len(live) < 2:
        return live[0] if live else results[0]
    best: dict[int, tuple[float, int]] = {}
    total: dict[int, float] = {}
    for result in live:
        for note, (chunk, value) in _normalised(result.hits).items():
            total[note] = total.get(note, 0.0) + value
            if note not in best or value > best[note][0]:
                best[note] = (value, chunk)
    hits = [
        NoteHit(n, chunk, value if rule == "max" else total[n] / len(live))
        for n, (value, chunk) in best.items()
    ]
    hits.sort(key=lambda h: (-h.score, h.note_rowid))
    evidence: dict[int, float] = {}
    calibrated = all(r.calibrated for r in live)
    if evidence_rule == "strong":
        strong = next(r for r in live if r.tier == STRONG)
        evidence, calibrated = dict(strong.evidence), strong.calibrated
    else:
        for result in live:
            for note, e in result.evidence.items():
                if evidence_rule == "max":
                    evidence[note] = max(e, evidence.get(note, 0.0))
                else:
                    evidence[note] = evidence.get(note, 0.0) + e / len(live)
    return ArmResult(
        live[0].name,
        hits,
        tier=BOTH,
        evidence=evidence,
        calibrated=calibrated,
    )


def _normalised(hits: list[NoteHit]) -> dict[int, tuple[int, float]]:
    """note -> (chunk, score min-max normalised over the tier's hits; 1 for a lone hit)."""
    if not hits:
        return {}
    lo, hi = min(h.score for h in hits), max(h.score for h in hits)
    span = hi - lo
    return {
        h.note_rowid: (h.chunk_rowid, (h.score - lo) / span if span > 1e-12 else 1.0) for h in hits
    }


def _query_vectors(embedder: Embedder, texts: list[str], light: bool = False) -> np.ndarray:
    """In a pool thread: the request itself ends at the deadline too, so no thread is left
    waiting on a hung endpoint (a CLI process would wait for it at exit, 30 s)."""
    with waiting_at_most(QUERY_DEADLINE_SECONDS):
        return embed_queries(embedder, texts, light=light)
