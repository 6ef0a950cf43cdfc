"""The C of analyze() and of the language detection's word counts
(vault_brain/native/textnative.c) against the Python of text/analysis.py they replace: the
same analysed text and the same detected language on any text, in every language, and over
every note of the shared corpora. Skipped where the extension was not built."""

from __future__ import annotations

import re
import tarfile
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.vault.test_links import corpus
from vault_brain.text import analysis
from vault_brain.text.analysis import (
    LANGUAGES,
    analyze,
    analyze_py,
    detect_language,
    detect_language_py,
    note_language,
)
from vault_brain.text.stopwords import STOPWORDS

native = pytest.importorskip(
    "vault_brain.native.textnative", reason="the C extension is not built (pip install -e .)"
)

# Pieces where the analysis branches: ASCII of both cases, digits and separators; Latin-1,
# Latin Extended (the detection's letters: ı ş ß ñ), Greek (final sigma), Cyrillic,
# Armenian; characters str.lower() or NFKC change (İ, ﬁ, Ⅻ, ², full-width letters); the
# slow class (combining marks, Devanagari, Thai, CJK, kana, hangul, astral); a lone
# surrogate; Unicode spaces and punctuation; stopwords of several languages.
_PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "The",
        "the",
        "and",
        "de",
        "la",
        "der",
        "und",
        "и",
        "не",
        "och",
        "che",
        "è",
        "est",
        "Running",
        "notes",
        "DLLs",
        "x9",
        "42",
        "_",
        "-",
        "'",
        " ",
        "\n",
        "\t",
        ".",
        "é",
        "Ö",
        "ß",
        "ñ",
        "ı",
        "ş",
        "ș",
        "ł",
        "ő",
        "ư",
        "İ",
        "ﬁ",
        "Ⅻ",
        "²",
        "Ａｂ",
        "ΣΑΣ",
        "λόγος",
        "Заметки",
        "ы",
        "ї",
        "Ամ",
        "ქა",
        "שלום",
        "كتاب",
        "پ",
        "\u0301",
        "e\u0301",
        "हिन्दी",
        "ไทย",
        "中文",
        "ひらがな",
        "한국어",
        "😀",
        "𝐀",
        "\ud800",
        "\u00a0",
        "\u2003",
        "—",
        "µ",
        "ª",
    ]
)
_TEXT = st.one_of(
    st.lists(_PIECES, max_size=40).map("".join),
    st.text(max_size=60),
    st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=80),
)
_LANGS = st.sampled_from(sorted(LANGUAGES) + ["xx"])


@settings(max_examples=4000, deadline=None)
@given(_TEXT, _LANGS)
def test_analyze_gives_what_the_python_gives(text: str, lang: str) -> None:
    assert analyze(text, lang) == analyze_py(text, lang)


@settings(max_examples=500, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=8), _LANGS)
def test_analyze_is_the_same_with_its_words_seen_before_or_not(texts: list[str], lang: str):
    first = [analyze(t, lang) for t in texts]
    again = [analyze(t, lang) for t in reversed(texts)][::-1]
    assert first == again == [analyze_py(t, lang) for t in texts]


_CANDIDATES = st.lists(st.sampled_from(sorted(LANGUAGES)), max_size=4)
_DEFAULTS = st.one_of(st.none(), st.sampled_from(sorted(LANGUAGES)))
_PROSE = st.lists(st.sampled_from([w for ws in STOPWORDS.values() for w in sorted(ws)[:40]]))


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(_TEXT, _PROSE.map(" ".join), st.tuples(_PROSE.map(" ".join), _TEXT).map(" ".join)),
    _CANDIDATES,
    _DEFAULTS,
)
def test_detect_language_gives_what_the_python_gives(text, candidates, default) -> None:
    assert detect_language(text, candidates, default) == detect_language_py(
        text, candidates, default
    )


def test_the_c_leaves_to_python_exactly_the_texts_with_a_slow_character():
    """Every code point: analyze() in C answers None (the Python's `regex` split) for those
    of the slow class, and the Python's words for the others."""
    forms = native.Forms(list, analysis._SLOW_CLASS)
    slow = analysis._scripts().slow
    differ = []
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        got = forms.analyze(ch)
        if (got is None) != bool(slow.match(ch)):
            differ.append(cp)
        elif got is not None and got != ("" if not ch.isalnum() else ch):
            differ.append(cp)
    assert differ == []


def test_ascii_text_is_lowered_by_the_c_and_other_text_is_taken_as_normalised():
    forms = native.Forms(list, analysis._SLOW_CLASS)
    assert forms.analyze("Hello, WORLD_42x") == "hello world 42x"
    assert forms.analyze("ÉTÉ Été") == "ÉtÉ Été"  # only A-Z: the caller lowers the rest
    assert forms.analyze("été x-Y") == "été x y"


def test_stopwords_drop_out_and_a_form_of_several_words_stays_as_it_is():
    seen: list[list[str]] = []

    def form(words: list[str]) -> list[str]:
        seen.append(words)
        return [{"the": "", "x": "a b"}.get(w, w.upper()) for w in words]

    forms = native.Forms(form, analysis._SLOW_CLASS)
    assert forms.analyze("the x the y x") == "a b Y a b"
    assert forms.analyze("y the z y") == "Y Z Y"
    assert forms.analyze("x y the") == "a b Y"
    assert seen == [["the", "x", "y"], ["z"]]  # a text's new words, once each, in one call
    assert forms.cached() == 4


def test_a_full_table_starts_over_and_gives_the_same_forms():
    calls: list[str] = []

    def form(words: list[str]) -> list[str]:
        calls.extend(words)
        return [w[::-1] for w in words]

    forms = native.Forms(form, analysis._SLOW_CLASS, 3)
    text = " ".join(f"w{i}" for i in range(10))
    expected = " ".join(f"{i}w" for i in range(10))
    assert forms.analyze(text) == expected
    assert forms.cached() <= 3
    assert forms.analyze(text) == expected
    assert len(calls) > 10  # asked again after the start over


def test_an_error_in_forms_propagates():
    def form(words: list[str]) -> list[str]:
        raise KeyError(words[0])

    forms = native.Forms(form, analysis._SLOW_CLASS)
    with pytest.raises(KeyError):
        forms.analyze("some words")
    for wrong in (lambda ws: 3, lambda ws: ws[:1], lambda ws: [3] * len(ws)):
        with pytest.raises(TypeError):
            native.Forms(wrong, analysis._SLOW_CLASS).analyze("some words")


def test_a_form_that_lets_other_threads_in_gets_what_one_thread_gets():
    """form() may release the GIL (a switch inside its Python): other threads fill and
    grow the same table meanwhile."""
    barrier = threading.Barrier(4)

    def form(words: list[str]) -> list[str]:
        for _ in range(20):  # Python bytecode: the interpreter may switch threads here
            pass
        return [w[::-1] for w in words]

    forms = native.Forms(form, analysis._SLOW_CLASS, 500)
    texts = [" ".join(f"w{i % (97 + k)}x{k}" for i in range(800)) for k in range(4)]
    expected = [" ".join(w[::-1] for w in t.split()) for t in texts]
    results: dict[int, list[str]] = {}

    def work(k: int) -> None:
        barrier.wait()
        results[k] = [forms.analyze(t) for _ in range(20) for t in texts]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected * 20 for k in range(4))


def test_vocab_counts_words_and_stopwords_per_language():
    vocab = native.Vocab(
        {"the": ("en",), "de": ("es", "fr"), "a": ("en",)},
        ("en", "es", "fr"),
        analysis._SLOW_CLASS,
        3,
    )
    words, distinct, letters, hits, kinds = vocab.count("The the THE the de x a De")
    assert (words, distinct, letters) == (8, None, len("the" + "de" + "x" + "a"))
    assert hits == (3, 2, 2)  # "the" capped at 3; "a" is one letter: not counted
    assert kinds == (1, 1, 1)
    words, distinct, letters, hits, kinds = vocab.count("été the été")
    assert (words, distinct) == (3, ["été", "the"])
    assert vocab.count("x \u0301") is None
    assert vocab.count("")[:3] == (0, None, 0)


# --- the real corpora --------------------------------------------------------------------


def _notes(archive: str):
    with tarfile.open(corpus(archive), "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".md"):
                handle = tar.extractfile(member)
                assert handle is not None
                yield member.name, handle.read()


@pytest.mark.slow
@pytest.mark.parametrize("archive", ["cpp-docs.tar.gz", "obsidian-help-i18n.tar.gz"])
def test_every_note_of_the_corpora_analyses_and_detects_the_same_with_and_without_c(archive):
    """Each note's language (detected among all, and among its vault's configured ones)
    and the analysed text of its title and of each paragraph of its body, in its language
    and in English."""
    from vault_brain.vault.note import UnreadableNote, parse_note

    differ: list[str] = []
    count = 0
    for name, raw in _notes(archive):
        try:
            note = parse_note(name, raw)
        except UnreadableNote:
            continue
        count += 1
        text = f"{note.title}\n\n{note.body}"
        locale = name.split("/")[1] if "i18n" in archive else "en"
        configured = [analysis.normalize_language(locale) or "en"]
        for candidates in ((), configured, [*configured, "en"]):
            default = candidates[0] if candidates else None
            if detect_language(text, candidates, default) != detect_language_py(
                text, candidates, default
            ):
                differ.append(f"{name}: detect {candidates}")
        lang = note_language(text, None, configured)
        for piece in [note.title, note.body, *re.split(r"\n\s*\n", note.body)]:
            for code in {lang, "en"}:
                if analyze(piece, code) != analyze_py(piece, code):
                    differ.append(f"{name}: analyze {code} {piece[:40]!r}")
    assert count > 5000
    assert differ == []
