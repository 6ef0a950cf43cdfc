"""The compiled static-model kernels (vault_brain/native/staticnative.c) give the Python path's
ids and vectors byte for byte: the same pieces, rows, parts, join and cut, and the means summed
in numpy's order (from 0.0, row after row in float32), with and without the x86 SIMD loops.
Skipped, with its reason, where the extension is not built."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.embed.test_piece_tokens import TEXTS, assert_same_ids
from vault_brain.embed.local import BUNDLED_MODEL
from vault_brain.embed.static import SMALL_BATCH, StaticModelFile
from vault_brain.embed.static_native import STATIC

pytestmark = pytest.mark.skipif(STATIC is None, reason="vault_brain.native.staticnative not built")


def pair() -> tuple[StaticModelFile, StaticModelFile]:
    """The same model twice: the compiled path, and the Python one (the reference)."""
    native, python = StaticModelFile.load(BUNDLED_MODEL), StaticModelFile.load(BUNDLED_MODEL)
    python.native = None
    return native, python


# One pair across all examples: both caches carry pieces from batch to batch alike.
NATIVE, PYTHON = pair()


def assert_same(texts: list[str], native=NATIVE, python=PYTHON) -> None:
    ids, lengths = native.token_ids(texts)
    want_ids, want_lengths = python.token_ids(texts)
    assert lengths.tolist() == want_lengths.tolist()
    assert ids.tolist() == want_ids.tolist()
    assert native.encode(texts).tobytes() == python.encode(texts).tobytes()
    assert native._pieces.native is not None and python._pieces.native is None
    # (the caches may differ: the compiled path keeps the pieces of a text before the one
    # holding an added token, the Python path none of that text's; their ids are the same)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_the_compiled_path_gives_the_python_paths_ids_and_vectors(texts):
    assert_same(texts)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=SMALL_BATCH + 1, max_size=30))
def test_any_unicode_text_alike(texts):
    texts = [t for t in texts if not any("\ud800" <= c <= "\udfff" for c in t)]
    if len(texts) > SMALL_BATCH:
        assert_same(texts)


def test_long_texts_repeats_and_added_tokens_alike():
    texts = [
        "word " * 3_000,
        "a " * 511 + "b c d",
        "x" * 20_000,
        "std::vector<int> " * 400,
        "東京" * 2_000,
        "[UNK] " * 600,
        "plain words then [UNK] then more",  # a new piece with an added token, mid-text
        "plain words then x[PAD]y then more",
        "again plain words",
        "ab\x0bcd and then some",  # a character the normaliser deletes: whole
        *(f"note {i} " * (100 + i) for i in range(20)),
    ]
    native, python = pair()
    for _ in range(3):  # the second and third time from the cache
        assert_same(texts, native, python)
        assert "[UNK]" not in native._pieces._rows
        assert not any("[" in p and "]" in p for p in native._pieces._rows)


def test_a_text_the_tokenizer_refuses_leaves_both_caches_alike():
    native, python = pair()
    bad = [f"fresh{i} piece{i} \ud800" for i in range(20)]  # a lone surrogate
    for model in (native, python):
        with pytest.raises(TypeError):
            model.token_ids(bad)
    assert_same([f"fresh{i} piece{i} again" for i in range(20)], native, python)


ASCII = st.lists(
    st.one_of(
        st.text(st.characters(max_codepoint=127), max_size=12),
        st.sampled_from(["Telecommunications", "UNAFFABLE", "x" * 100, "y" * 101, "\x01" * 3]),
        st.sampled_from(["##s", "[UNK]", "a\x00b", "A\x7fB", "std::vector<int>", "0x1F2e"]),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(ASCII, min_size=SMALL_BATCH + 1, max_size=30))
def test_ascii_parts_get_the_tokenizers_ids_from_the_compiled_wordpiece(texts):
    """Every ASCII part a fresh model meets goes through the compiled WordPiece (controls,
    upper case, words at and past 100 characters, unknown rests, lone punctuation)."""
    native = StaticModelFile.load(BUNDLED_MODEL)
    assert_same_ids(native, texts)
    assert native._pieces._wordpiece is not None


def test_a_cache_that_starts_over_alike(monkeypatch):
    """Pieces leave the table (a full cache, long pieces, whole texts): the compiled lookups'
    front of short pieces must not give a row the table no longer holds."""
    from vault_brain.embed import piece_tokens

    monkeypatch.setattr(piece_tokens, "MAX_PIECES", 7)
    monkeypatch.setattr(piece_tokens, "MAX_ROWS", 60)
    monkeypatch.setattr(piece_tokens, "MAX_IDS", 120)
    native, python = pair()
    for n in range(12):
        texts = [
            f"batch {n % 3} text {i % 5} " + "word " * (i * n % 13) + "ab\x0bcd " * (i == 3)
            + "long" * 12 * (i % 4 == 1) + f" w{(i + n) % 9}"
            for i in range(20)
        ]  # fmt: skip
        assert_same(texts, native, python)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS, st.lists(st.text(max_size=40), max_size=10))
def test_new_parts_joined_into_one_tokenizer_call_alike(atoms, texts):
    """The compiled path hands its new non-ASCII parts to the tokenizer many a call, joined
    by '|' and cut back at its id: from the first part on, a few parts a text."""
    from vault_brain.embed import piece_tokens

    texts = [t for t in texts if not any("\ud800" <= c <= "\udfff" for c in t)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(piece_tokens, "JOIN_FROM", 1)
        patch.setattr(piece_tokens, "PARTS_PER_CALL", 3)
        assert_same(atoms + texts)


def test_a_part_that_gives_the_separators_id_goes_alone(monkeypatch):
    """'\u037e' (Greek question mark) is ';' after NFD: with ';' for the separator its part
    adds an id the count sees, and that call's parts go one a text."""
    from vault_brain.embed import piece_tokens

    monkeypatch.setattr(piece_tokens, "SEPARATOR", ";")
    monkeypatch.setattr(piece_tokens, "JOIN_FROM", 1)
    native, python = pair()
    texts = [f"σοφία{i} x\u037ey{i} ε{i}" for i in range(20)]
    native.token_ids(["warm"] * 17)  # the cache, made on the first big batch
    calls = []
    original = native._pieces._tokenize
    native._pieces._tokenize = lambda parts: calls.append(list(parts)) or original(parts)
    assert_same(texts, native, python)
    assert native._pieces._joiner  # the parts were joined ...
    assert any(any("\u037e" in p for p in parts) for parts in calls)  # ... then went alone


def test_the_split_characters_are_str_splits():
    import sys

    want = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())
    assert STATIC.split_characters() == want


# --- the means ---------------------------------------------------------------------------------


def numpy_means(table: np.ndarray, ids: np.ndarray, lengths: np.ndarray, unk: int) -> np.ndarray:
    """What encode's numpy path computes: per text, the float32 mean of its known rows."""
    out = np.zeros((len(lengths), table.shape[1]), dtype=np.float32)
    at = 0
    for n, length in enumerate(lengths.tolist()):
        row = ids[at : at + length]
        at += length
        known = row[row != unk]
        if len(known):
            out[n] = table.astype(np.float32)[known[None, :]].mean(axis=1)[0]
    return out


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "portable"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dim=st.sampled_from([2, 7, 8, 9, 33, 64, 73, 130, 256]))
def test_the_means_are_numpys_byte_for_byte(simd, dtype, seed, dim):
    # (one dimension is left to numpy: its sum over a single column is pairwise)
    rng = np.random.default_rng(seed)
    # a wide range of magnitudes and signs, zeros of both signs: the order of the sums shows
    scale = np.exp2(rng.integers(-20, 12, size=(40, dim)))
    table = (rng.standard_normal((40, dim)) * scale).astype(dtype)
    table[rng.random((40, dim)) < 0.05] = -0.0
    table[rng.random((40, dim)) < 0.05] = 0.0
    lengths = rng.integers(0, 600, size=12).astype(np.int64)
    ids = rng.integers(0, 40, size=int(lengths.sum())).astype(np.int64)
    unk = 3
    out = np.full((len(lengths), dim), np.nan, dtype=np.float32)
    STATIC.use_simd(simd)
    try:
        STATIC.mean_rows(ids, lengths, table, unk, out)
    finally:
        STATIC.use_simd(True)
    assert out.tobytes() == numpy_means(table, ids, lengths, unk).tobytes()


def test_every_float16_widens_as_numpy_widens_it():
    table = np.arange(1 << 16, dtype=np.uint16).view(np.float16).reshape(-1, 16)
    table = table[~np.isnan(table).any(axis=1)]  # a NaN's payload is not a vector's concern
    ids = np.arange(len(table), dtype=np.int64)
    for simd in (True, False):
        out = np.empty((len(table), 16), dtype=np.float32)
        STATIC.use_simd(simd)
        try:
            STATIC.mean_rows(ids, np.ones(len(table), dtype=np.int64), table, -1, out)
        finally:
            STATIC.use_simd(True)
        want = table.astype(np.float32) + np.float32(0)  # numpy's sum starts at +0.0
        assert out.tobytes() == want.tobytes()


def test_bad_arguments_raise_instead_of_reading_out_of_bounds():
    table = np.zeros((4, 8), dtype=np.float16)
    out = np.empty((1, 8), dtype=np.float32)
    with pytest.raises(IndexError):
        STATIC.mean_rows(np.array([4], dtype=np.int64), np.array([1]), table, -1, out)
    with pytest.raises(ValueError):
        STATIC.mean_rows(np.array([1], dtype=np.int64), np.array([2]), table, -1, out)
    with pytest.raises(TypeError):
        STATIC.mean_rows(np.array([1], dtype=np.int32), np.array([1]), table, -1, out)
    with pytest.raises(IndexError):
        STATIC.join(
            np.array([5]), np.array([1]), np.zeros(2, np.int64), np.zeros(2, np.int64),
            np.zeros(4, np.int32), 512,
        )  # fmt: skip
