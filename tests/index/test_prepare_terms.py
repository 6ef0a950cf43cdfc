"""The note's own full-text row is analysed from its chunks' pieces (index/prepare.py's
analysed_bodies): the same terms as analysing every chunk and the whole body apart."""

from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.index.chunking import chunk_note
from vault_brain.index.prepare import analysed_bodies
from vault_brain.text.analysis import analyze

# Words of several scripts, and the characters where a cut could change the analysis:
# a final sigma, combining marks, CJK and Thai runs, NFKC compatibility forms, punctuation.
PIECES = [
    "alpha",
    "Beta",
    "running",
    "ΣΟΦΟΣ",
    "λόγος",
    "e\u0301",
    "\u0301",
    "東京都",
    "日本語",
    "ภาษาไทย",
    "ﬁle",
    "Ⅻ",
    "x²",
    "naïve",
    "C++",
    "don't",
    "a_b",
    "123",
    "ß",
    "İstanbul",
    "#",
    "`code`",
    "- item",
    "## Heading",
    "\u3000",
    "\u00a0",
    "ΣΟΦΟΣ.",
    "ΑΣ'",
    "<\u0338",
    "=\u0338x",
    "[link](a/b.md#c)",
    "|cell|",
    "x_y",
]
SEPARATORS = [" ", " ", " ", "\n", "\n\n", "\t", "", "", ".", ", ", ":", "'", "|", "(", "/", "<"]

texts = st.lists(
    st.tuples(st.sampled_from(PIECES), st.sampled_from(SEPARATORS)), min_size=1, max_size=400
).map(lambda parts: "".join(p + s for p, s in parts))


def separately(body: str, chunks, lang: str) -> tuple[list[str], str]:
    return [analyze(ch.text, lang) for ch in chunks], analyze(body, lang)


@settings(max_examples=300, deadline=None)
@given(texts, st.sampled_from(["en", "de", "el", "ja"]), st.sampled_from([8, 16, 40, 80]))
def test_the_same_terms_as_analysing_apart(body, lang, window):
    chunks = chunk_note("T", body, max_tokens=window, overlap=window // 4, min_tokens=2)
    assert analysed_bodies(body, chunks, lang) == separately(body, chunks, lang)


def test_long_note_is_cut_into_overlapping_windows_and_keeps_its_terms():
    body = "\n\n".join(
        f"Paragraph {i} about Σίσυφος and naïve parsers, ﬁle {i}, 東京 {i}." for i in range(200)
    )
    chunks = chunk_note("T", body, max_tokens=60, overlap=12, min_tokens=8)
    assert len(chunks) > 10 and all(ch.start >= 0 for ch in chunks)
    assert any(a.end > b.start for a, b in zip(chunks, chunks[1:], strict=False))  # overlap
    assert analysed_bodies(body, chunks, "en") == separately(body, chunks, "en")


def test_cut_inside_a_word_falls_back_to_analysing_apart():
    body = "x" * 3000  # one word longer than a window: cut inside it
    chunks = chunk_note("T", body, max_tokens=50, overlap=5, min_tokens=4)
    assert len(chunks) > 1
    assert analysed_bodies(body, chunks, "en") == separately(body, chunks, "en")


def test_lone_surrogates_and_empty_bodies():
    for body in ["", "  \n ", "word \ud800 other " * 300, "short body"]:
        chunks = chunk_note("Title", body, max_tokens=40, overlap=8, min_tokens=4)
        assert analysed_bodies(body, chunks, "en") == separately(body, chunks, "en")
