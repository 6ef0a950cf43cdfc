"""The C frontmatter loader (vault_brain/native/_frontmatter.c) against PyYAML: a block it
reads gives PyYAML's value (or PyYAML's error, raised while building a value); a block it
does not read goes to PyYAML. The corpora's every note: tests/vault/test_native_mdscan.py.
Skipped where the extension was not built."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault import frontmatter

native = pytest.importorskip(
    "vault_brain.native._frontmatter", reason="the C extension is not built (pip install -e .)"
)


def _outcome(fn, block: str):  # noqa: ANN001, ANN202
    try:
        return "value", repr(fn(block))
    except Exception as exc:  # noqa: BLE001 - the test compares which
        return "error", type(exc).__name__, str(exc)


def _c(block: str):  # noqa: ANN202
    return native.load(block, frontmatter._plain, {}, frontmatter._FIRSTS)


def _check(block: str) -> bool:
    """The loader's outcome is PyYAML's; whether the C read the block."""
    expected = _outcome(frontmatter.load_block_py, block)
    assert _outcome(frontmatter.load_block, block) == expected
    try:
        got = _c(block)
    except Exception as exc:  # noqa: BLE001
        assert expected == ("error", type(exc).__name__, str(exc))
        return True
    if got is not None:
        assert ("value", repr(got)) == expected
    return got is not None


_KEYS = [
    "title",
    "tags",
    "tag",
    "id",
    "yes",
    "No",
    "on",
    "1",
    "0x1f",
    "1.5",
    "ms.date",
    "_k",
    "a-b",
    "2024-01-02",
    "null",
    "~",
    "key with space",
    "k:",
    "-k",
    ".k",
    "<<",
    "=",
    "é",
]
_VALUES = [
    "",
    " ",
    "plain words",
    "Warning C26400",
    "10/23/2020",
    "2024-02-30",
    "2024-01-05",
    "2024-01-05 10:20:30",
    "2024-01-05T10:20:30Z",
    "12",
    "012",
    "0o17",
    "0x1F",
    "1_000",
    "1:20",
    "1e3",
    ".inf",
    "-.inf",
    ".nan",
    "+1",
    "-2",
    "~",
    "null",
    "Null",
    "true",
    "yes",
    "off",
    "y",
    "=",
    "<<",
    "a: b",
    "a:",
    "a :b",
    "http://x.y/z",
    "C#",
    "a #b",
    "#c",
    '"double"',
    '"with \\" escape"',
    '"a\\nb"',
    '""',
    "'single'",
    "'it''s'",
    "''",
    "'open",
    '"open',
    "[]",
    "[ ]",
    '["a", "b"]',
    "[a, b c, 1, 2024-01-05]",
    "[a,]",
    "[a, [b]]",
    "[a",
    "{a: b}",
    "&anchor x",
    "*alias",
    "!tag x",
    "!!str 1",
    "|",
    ">",
    "- x",
    "? x",
    "%x",
    "@x",
    "`x`",
    "a,b",
    "a]",
    "x\ty",
    "NEL\x85",
    "BOM\ufeff",
    "ctl\x07",
    "é ü 😀",
    "\u2028",
    "a  b",
    "trailing  ",
    "a 'b' \"c\"",
    "x" * 1100,
]
_LINES = st.one_of(
    st.tuples(
        st.sampled_from(_KEYS),
        st.sampled_from([":", ": ", ":  ", " : ", ":\t"]),
        st.sampled_from(_VALUES),
    ).map("".join),
    st.tuples(
        st.sampled_from(["", " ", "  ", "   ", "\t"]),
        st.sampled_from(["- ", "-", "-  "]),
        st.sampled_from(_VALUES),
    ).map("".join),
    st.sampled_from(
        [
            "",
            " ",
            "# comment",
            "  # indented comment",
            "---",
            "...",
            "  more",
            "   continued words",
            "key:",
            "tags:",
            "  sub: 1",
            "%YAML 1.1",
        ]
    ),
)
_BLOCKS = st.lists(_LINES, max_size=12).map(lambda lines: "".join(f"{x}\n" for x in lines))


@settings(max_examples=6000, deadline=None)
@given(_BLOCKS)
def test_a_block_gives_what_pyyaml_gives(block: str) -> None:
    _check(block)


_SIMPLE_KEYS = [k for k in _KEYS if k[0].isascii() and (k[0].isalnum() or k[0] == "_")]
_SIMPLE_VALUES = [v for v in _VALUES if "\t" not in v and len(v) < 100]
_ENTRY = st.one_of(
    st.tuples(st.sampled_from(_SIMPLE_KEYS), st.sampled_from(_SIMPLE_VALUES)).map(
        lambda kv: f"{kv[0]}: {kv[1]}\n"
    ),
    st.tuples(
        st.sampled_from(_SIMPLE_KEYS),
        st.sampled_from(["", " ", "  ", "    "]),
        st.lists(st.sampled_from(_SIMPLE_VALUES), max_size=4),
    ).map(lambda k: f"{k[0]}:\n" + "".join(f"{k[1]}- {v}\n" for v in k[2])),
    st.sampled_from(["\n", "# c\n", "  \n"]),
)


@settings(max_examples=6000, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=8).map("".join))
def test_a_simple_block_gives_what_pyyaml_gives(block: str) -> None:
    _check(block)


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=80))
def test_any_text_at_all(block: str) -> None:
    _check(block)


@pytest.mark.parametrize(
    "block",
    [
        'title: Warning C26400\ndescription: "Learn more: x"\nms.date: 10/23/2020\n'
        'f1_keywords: ["C26400", "NO_RAW_POINTER_ASSIGNMENT"]\nhelpviewer_keywords: ["C26400"]\n',
        "id: 12345678\ncreated: 2024-01-05\nupdated: 2024-01-05 10:20:30\ntags:\n  - a\n  - b\n",
        "tags:\n- a\n- 'b c'\n- \"d\"\naliases: [x, 'y', \"z\"]\nsummary:\n",
        "yes: no\n1: 2\nt: ~\nnull: null\n1.5: .inf\n0x1f: 0o17\n",
        "title: a\ntitle: b\nTitle: c\n",  # duplicates: the last wins, at the first's place
        "# a comment\n\ntitle: x   \n\n# another\n",
        "bad: 2024-02-30\nok: 2024-02-28\n",  # an impossible date stays text
        "title: it's\nq: 'it''s'\nempty: ''\nd: \"\"\n",
        "n: " + "1" * 5000 + "\n",  # int() refuses more than 4300 digits: PyYAML's error
    ],
)
def test_blocks_the_c_reads(block: str) -> None:
    assert _check(block)


@pytest.mark.parametrize(
    "block",
    [
        "",
        "# only a comment\n",
        "title: x\n  continued\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: |\n  text\n",
        "a: b: c\n",
        "a: x # comment\n",
        "a:\n  b: 1\n",
        "a:\n  - 1\n - 2\n",
        "a: [x,]\n",
        "a:\tb\n",
        'a: "esc\\n"\n',
        "a: 'open\n  more'\n",
        "<<: {a: 1}\n",
        "a: =\n",
        "- a\n- b\n",
        "just text\n",
        "k" * 1001 + ": v\n",
    ],
)
def test_blocks_left_to_pyyaml(block: str) -> None:
    assert _c(block) is None
    _check(block)


def test_the_cache_is_bounded_and_holds_what_plain_gave() -> None:
    cache: dict = {}
    for i in range(9000):
        got = native.load(f"n: {i}\nw: word {i}\n", frontmatter._plain, cache, frontmatter._FIRSTS)
        assert got == {"n": i, "w": f"word {i}"}
    assert len(cache) == 8192  # "n" and the numbers; "w" and "word ..." need no resolver
    assert cache["n"] == "n" and cache["1"] == 1 and "w" not in cache


def test_an_error_of_plain_comes_through() -> None:
    def broken(text: str):  # noqa: ANN202
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        native.load("a: 1\n", broken, {}, frontmatter._FIRSTS)
    assert native.load("a: 1\n", lambda t: NotImplemented, {}, frontmatter._FIRSTS) is None


def test_the_int_digits_limit_is_pyyamls(monkeypatch) -> None:
    assert sys.get_int_max_str_digits() > 0
    block = "n: " + "9" * (sys.get_int_max_str_digits() + 1) + "\n"
    assert _outcome(frontmatter.load_block, block)[0] == "error"
    assert _check(block)
