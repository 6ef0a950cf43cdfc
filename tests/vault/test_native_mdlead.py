"""The C lead (vault_brain/native/_mdlead.c) against the Python of vault/note.py it
replaces: plain_inline and the lead's text give the same str on any text (the corpora's
every note: tests/vault/test_native_mdscan.py). Skipped where the extension was not built."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault import blocks, note

native = pytest.importorskip(
    "vault_brain.native._mdlead", reason="the C extension is not built (pip install -e .)"
)

# Pieces where plain_inline's patterns branch: every pattern's opener and closer, their
# lookarounds' neighbours (word characters, '*', spaces of every kind), placeholders'
# digits, schemes, table and list markers, and code points of every str kind.
_INLINE = [
    "*",
    "**",
    "***",
    "_",
    "__",
    "~~",
    "==",
    "=",
    "~",
    "`",
    "``",
    "[",
    "]",
    "[[",
    "]]",
    "![",
    "![[",
    "(",
    ")",
    "](",
    "]:",
    "[^",
    "#",
    "|",
    "<",
    ">",
    "</",
    "<b>",
    "<https:",
    "<http:",
    "<mailto:",
    "<ftp:",
    "^",
    " ^a-1",
    "\\",
    "\\*",
    "\\\\",
    "!",
    ":",
    "/",
    ".",
    "-",
    "+",
    "a",
    "Z",
    "9",
    "0",
    "é",
    "ß",
    "€",
    "😀",
    "٣",
    "\ud800",
    " ",
    "\t",
    "\u00a0",
    "\u2003",
    "\x1f",
    "\x85",
    "$$",
    "<!--",
    "-->",
    "[!note]",
    "- ",
    "1. ",
    "[x] ",
    "| --- |",
]
_LINE = st.lists(st.sampled_from(_INLINE), max_size=40).map("".join)
_BODY = st.lists(st.sampled_from([*_INLINE, "\n", "\n\n", "```\n", "~~~\n", "# t\n"]), max_size=80)


@settings(max_examples=4000, deadline=None)
@given(_LINE)
def test_plain_inline_is_the_python_one(line: str) -> None:
    got = native.plain_inline(line, blocks.code_spans)
    assert got == note.plain_inline_py(line)


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=60))
def test_plain_inline_on_any_text(text: str) -> None:
    got = native.plain_inline(text, blocks.code_spans)
    if "\n" in text or "\x00" in text:
        assert got is None  # the Python reads it
    else:
        assert got == note.plain_inline_py(text)
    assert note.plain_inline(text) == note.plain_inline_py(text)


@settings(max_examples=3000, deadline=None)
@given(_BODY.map("".join), st.sampled_from([0, 5, 40, 300, 10**9]))
def test_the_lead_text_is_the_python_one(body: str, limit: int) -> None:
    scanned = blocks.scan(body)
    got = native.lead_text(body, scanned.fenced, limit, note.LEAD_CHARS * 8, blocks.code_spans)
    if got is None:
        assert "\x00" in body  # the Python reads it
    else:
        text, stop = got
        assert text == note._lead_parts(body, limit, scanned)
        if stop < len(body):  # the text was full before the end: the rest changes nothing
            assert body[stop] == "\n"
            cut = body[:stop] + "\n" + "never read " * 100
            assert note._lead_parts(cut, limit, blocks.scan(cut)) == text
        else:
            assert stop == len(body)


def _lead_py(body: str, limit: int) -> str:
    """extract_lead as the Python alone makes it (the reference)."""
    if "<!--" in body or "%%" in body:
        body = note._COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), body)
    return note._cut(note._lead_parts(body, limit, blocks.scan(body)), limit)


_COMMENTED = st.lists(
    st.sampled_from([*_INLINE, "\n", "\n\n", "```\n", "<!--", "-->", "%%", "word " * 8]),
    max_size=60,
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.text(max_size=80), _COMMENTED), st.sampled_from([3, 20, 300]))
def test_extract_lead_is_the_python_one(body: str, limit: int) -> None:
    expected = _lead_py(body, limit)
    assert note.extract_lead(body, limit) == expected
    assert note.extract_lead(body, limit, blocks.scan(body)) == expected


@pytest.mark.parametrize(
    "line",
    [
        "**bold** and *em* and __u__ and _e_ ~~gone~~ ==mark==",
        "see [[Note#Part|alias]] and [text](http://x.y) [^1] <https://a.b> <b>tag</b>",
        "![[image.png]] ![alt](pic.png) `code [[not a link]]` \\*escaped\\* block ^abc-1",
        "***both*** kept",
        "a*b*c _x_y `a` **`b`** [[`c`|d]] [e](f(g)h) [i][j] [^k] x^y ^z",
        "*" + "a" * 299 + "* *" + "a" * 300 + "*",
        "`x`" * 12 + " _`1`_ *`10`*",
    ],
)
def test_examples(line: str) -> None:
    assert native.plain_inline(line, blocks.code_spans) == note.plain_inline_py(line)


def test_lines_the_lead_skips():
    body = "\n".join(
        [
            "# title",
            "  ### h",
            "####### not a heading",
            "---",
            "* * *",
            "| a | b |",
            ":--|--:|",
            "--- | ---",
            "-- ||",
            "> > quoted *text*",
            "> [!tip]- Callout text",
            "- [ ] task one",
            "12) item",
            "1234567890. not a list",
            "[^1]: a footnote",
            "[ref]: http://x",
            "$$",
            "<!-- x",
            "-->",
            "- # heading in a list",
            "plain words",
        ]
    )
    scanned = blocks.scan(body)
    for limit in (10, 300, 10**9):
        got = native.lead_text(body, scanned.fenced, limit, 2400, blocks.code_spans)
        assert got[0] == note._lead_parts(body, limit, scanned)


def test_a_nul_is_left_to_the_python():
    assert native.plain_inline("a\x000\x00 `b`", blocks.code_spans) is None
    body = "first\nsecond \x00 line"
    assert native.lead_text(body, (), 300, 2400, blocks.code_spans) is None
    assert note.extract_lead(body) == _lead_py(body, 300)


def test_errors_of_code_spans_come_through():
    def broken(text: str) -> list:
        raise RuntimeError("no spans")

    with pytest.raises(RuntimeError, match="no spans"):
        native.plain_inline("a `b` c", broken)
    with pytest.raises(ValueError, match="out of order"):
        native.plain_inline("a `b` c", lambda text: [(4, 3, 2, 1)])
