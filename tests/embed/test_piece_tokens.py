"""A big batch's token ids come from cached pieces (embed/piece_tokens.py), and they are
exactly the ids `tokenizers` gives, cut to max_length: on generated text of every script and
odd character, across batches that share the cache, and on every chunk of two real vaults."""

from __future__ import annotations

import sys
import tarfile
from itertools import chain
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vault_brain.embed import piece_tokens
from vault_brain.embed.local import BUNDLED_MODEL
from vault_brain.embed.piece_tokens import PieceTokens
from vault_brain.embed.static import SMALL_BATCH, StaticModelFile

MODEL = StaticModelFile.load(BUNDLED_MODEL)


def tokenizers_ids(model: StaticModelFile, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The ids as the tokenizer alone gives them (its truncation is the model's max_length)."""
    texts = [t[: model.max_chars] for t in texts]
    rows = [e.ids for e in model.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    return np.fromiter(chain.from_iterable(rows), dtype=np.int64), lengths


def assert_same_ids(model: StaticModelFile, texts: list[str]) -> None:
    assert len(texts) > SMALL_BATCH  # a big batch: the cached path
    ids, lengths = model.token_ids(texts)
    want_ids, want_lengths = tokenizers_ids(model, texts)
    assert lengths.tolist() == want_lengths.tolist()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for n, text in enumerate(texts):  # text by text, so a failure names its text
        got = ids[starts[n] : starts[n + 1]].tolist()
        want = want_ids[starts[n] : starts[n + 1]].tolist()
        assert got == want, repr(text[:200])


def assert_same_vectors(model: StaticModelFile, texts: list[str]) -> None:
    """Byte for byte the mean of each text's known tokens' rows, the tokenizer's ids."""
    got = model.encode(texts)
    table = model.stored.astype(np.float32)
    rows = model.tokenizer.encode_batch_fast(
        [t[: model.max_chars] for t in texts], add_special_tokens=False
    )
    for text, row, encoding in zip(texts, got, rows, strict=True):
        known = [i for i in encoding.ids if i != model.unk_id]
        if not known:
            assert not row.any(), repr(text[:80])
            continue
        want = table[np.array([known], dtype=np.int64)].mean(axis=1)[0]
        assert row.tobytes() == want.tobytes(), repr(text[:80])


# Pieces of text from every corner the BERT pipeline treats apart: ASCII words and
# punctuation, every whitespace character Python knows (some of them the normaliser deletes),
# controls, accents precomposed and combining, case folds that grow ('İ'), final sigma,
# CJK (spaced per ideograph), Thai, Arabic, Hebrew, Devanagari, emoji with joiners and
# skin tones, zero-width and replacement characters, the added tokens, words past
# WordPiece's 100 characters.
WHITESPACE = [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]
ATOMS = [
    *WHITESPACE,
    *"abcXYZ019_-.,:;!?'\"()[]{}<>/\\|@#$%^&*+=~`",
    "\x00",
    "\x01",
    "\x7f",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\ufffd",
    "\u00ad",
    "é",
    "e\u0301",
    "\u0301",
    "\u0316\u0301",
    "Ñ",
    "ǅ",
    "İ",
    "ß",
    "ﬁ",
    "ΣΑΣ",
    "ς",
    "Ä",
    "東京",
    "の",
    "한국어",
    "ภาษาไทย",
    "العربية",
    "עברית",
    "हिन्दी",
    "Ελληνικά",
    "Привет",
    "🙂",
    "👍🏽",
    "👨\u200d👩\u200d👧",
    "—",
    "“",
    "…",
    "·",
    "\u037e",
    "①",
    "½",
    "[UNK]",
    "[PAD]",
    "[CLS]",
    "[UN",
    "K]",
    "word",
    "words",
    "std::vector<int>",
    "https://example.com/a/b?c=d",
    "x" * 101,
    "ab" * 60,
    "Überprüfung",
    "naïve",
]


TEXTS = st.lists(
    st.lists(st.sampled_from(ATOMS), max_size=40).map("".join),
    min_size=SMALL_BATCH + 1,
    max_size=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_the_cached_ids_are_the_tokenizers_ids(texts):
    # One model across all examples: the cache carries pieces from batch to batch.
    assert_same_ids(MODEL, texts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=SMALL_BATCH + 1, max_size=30))
def test_any_unicode_text_gets_the_tokenizers_ids(texts):
    texts = [t for t in texts if not any("\ud800" <= c <= "\udfff" for c in t)]
    if len(texts) > SMALL_BATCH:
        assert_same_ids(MODEL, texts)


def test_texts_past_max_length_are_cut_as_the_tokenizer_cuts_them():
    texts = [
        "word " * 3_000,  # past 512 tokens, and past max_chars characters
        "a " * 511 + "b c d",  # just past 512 tokens
        "a " * 512,  # exactly 512
        "x" * 20_000,  # one piece past max_chars
        "std::vector<int> " * 400,  # pieces of many ids each
        "東京" * 2_000,  # one piece, an id per ideograph
        "[UNK] " * 600,  # unknown tokens count before they are dropped
        *(f"note {i} " * (100 + i) for i in range(20)),
    ]
    assert_same_ids(MODEL, texts)
    assert_same_vectors(MODEL, texts)


def test_every_whitespace_character_between_two_words():
    """str.split cuts at each; the tokenizer deletes some (control characters): those texts
    go to the tokenizer whole."""
    texts = [f"ab{c}cd e{c}{c}f{c}" for c in WHITESPACE]
    texts += [f"{c}[UNK]{c}x" for c in WHITESPACE]
    assert_same_ids(MODEL, texts)


def test_the_same_vectors_as_the_tokenizers_path():
    texts = [
        "how do we deploy to production",
        "",
        "   ",
        "Wie bekomme ich eine gelöschte Notiz zurück?",
        "東京の天気は晴れ",
        "🙂🙂",
        "[UNK] [CLS] [SEP] plain",
        *(f"mixed 🙂 text {i} about std::map<K, V> and naïve café" * (i % 9) for i in range(40)),
    ]
    assert_same_vectors(MODEL, texts)


def test_a_full_cache_starts_over_and_keeps_the_same_ids(monkeypatch):
    monkeypatch.setattr(piece_tokens, "MAX_PIECES", 5)
    monkeypatch.setattr(piece_tokens, "MAX_PARTS", 5)
    monkeypatch.setattr(piece_tokens, "MAX_ROWS", 50)
    monkeypatch.setattr(piece_tokens, "MAX_IDS", 100)
    model = StaticModelFile.load(BUNDLED_MODEL)
    for n in range(6):
        texts = [f"batch {n} text {i} " + "word " * (i * n % 13) for i in range(20)]
        assert_same_ids(model, texts)
    assert len(model._pieces._rows) < 200


def test_a_text_the_tokenizer_refuses_leaves_the_cache_sound():
    model = StaticModelFile.load(BUNDLED_MODEL)
    bad = [f"fresh{i} piece{i} \ud800" for i in range(20)]  # a lone surrogate
    with pytest.raises(TypeError):
        model.token_ids(bad)
    assert_same_ids(model, [f"fresh{i} piece{i} again" for i in range(20)])


def test_a_tokenizer_of_another_kind_gets_no_cache():
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel, WordPiece

    vocab = {"[UNK]": 0, "a": 1, "b": 2}
    word_level = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    word_level.normalizer = normalizers.BertNormalizer()
    word_level.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    assert PieceTokens.for_tokenizer(word_level, 512) is None
    metaspace = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    metaspace.normalizer = normalizers.BertNormalizer()
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()
    assert PieceTokens.for_tokenizer(metaspace, 512) is None
    bert = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    bert.normalizer = normalizers.BertNormalizer()
    bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    assert PieceTokens.for_tokenizer(bert, 512) is not None
    bert.add_tokens(["a b"])  # an added token across a space: not local
    assert PieceTokens.for_tokenizer(bert, 512) is None


# --- every chunk of two real vaults (../shared) ----------------------------------------------


def chunk_texts(archive: Path, prefix: str, into: Path) -> list[str]:
    """What the index embeds for every chunk of every note under `prefix` of the archive."""
    from vault_brain.config import load_settings
    from vault_brain.index.prepare import embed_text, prepare
    from vault_brain.vault.scan import scan_vault

    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(into, members=members, filter="data")
    vault = into / prefix
    settings = load_settings(vault=str(vault), env={})
    texts = []
    for stat in scan_vault(vault).files:
        prepared = prepare(vault, stat, None, settings, False)
        if prepared.rows is not None:
            texts.extend(embed_text(c) for c in prepared.rows[1])
    return texts


@pytest.mark.slow
@pytest.mark.parametrize(
    ("archive", "prefix", "at_least"),
    [
        ("cpp-docs.tar.gz", "cpp-docs/docs", 30_000),
        ("obsidian-help-i18n.tar.gz", "obsidian-help-i18n", 10_000),
    ],
    ids=["cpp-docs", "obsidian-help-i18n"],
)
def test_every_chunk_of_a_real_vault_gets_the_tokenizers_ids(
    shared_dir, tmp_path, archive, prefix, at_least
):
    path = shared_dir / "corpora" / archive
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared without the corpora)")
    texts = chunk_texts(path, prefix, tmp_path)
    assert len(texts) >= at_least
    model = StaticModelFile.load(BUNDLED_MODEL)
    for at in range(0, len(texts), 100):  # as the parse workers' batches share a cache
        batch = texts[at : at + 100]
        if len(batch) <= SMALL_BATCH:
            batch = texts[-100:]
        assert_same_ids(model, batch)
        assert_same_vectors(model, batch)
