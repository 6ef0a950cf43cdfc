"""The C block scan, code spans, masking and Markdown links (vault_brain/native/_mdscan.c)
against the Python of vault/blocks.py and vault/links.py they replace: the same answers on
any text, and the same parsed notes over the shared corpora. Skipped where the extension
was not built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.vault.test_links import corpus
from vault_brain.index import chunking
from vault_brain.text import analysis
from vault_brain.vault import blocks, links

native = pytest.importorskip(
    "vault_brain.native._mdscan", reason="the C extension is not built (pip install -e .)"
)

# Pieces of Markdown where the scanners branch: backtick and tilde runs of every length,
# escapes, fences after indentation and '>', headings with closing '#'s, blank lines with
# spaces, CRLF and lone CR, code points of every str kind (Latin-1, BMP, astral, a lone
# surrogate) and Unicode spaces that str.strip() removes.
_PIECES = st.sampled_from(
    [
        "`",
        "``",
        "```",
        "````",
        "~~~",
        "~~~~",
        "\\",
        "\\\\",
        "a",
        " ",
        "   ",
        "    ",
        "\t",
        ">",
        "> ",
        "#",
        "# ",
        "## t",
        "####### x",
        " #",
        "\n",
        "\n\n",
        "\n \t\n",
        "\r\n",
        "\r",
        "x y",
        "é",
        "€",
        "😀",
        "\ud800",
        "\u00a0",
        "\u2003",
        "\x1f",
        "\u3000",
        "py",
    ]
)
_MARKDOWN = st.lists(_PIECES, max_size=60).map("".join)


@settings(max_examples=4000, deadline=None)
@given(_MARKDOWN)
def test_scan_finds_what_the_python_finds(text: str) -> None:
    assert blocks.scan(text) == blocks.scan_py(text)


@settings(max_examples=4000, deadline=None)
@given(_MARKDOWN)
def test_code_spans_are_the_python_ones(text: str) -> None:
    assert native.code_spans(text) == blocks.code_spans_py(text)


@settings(max_examples=4000, deadline=None)
@given(_MARKDOWN)
def test_masking_gives_the_same_str(text: str) -> None:
    found = blocks.scan_py(text)
    masked = blocks.mask_code(text, found)
    assert masked == blocks.mask_code_py(text, found)
    assert len(masked) == len(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=80))
def test_any_text_at_all(text: str) -> None:
    found = blocks.scan_py(text)
    assert blocks.scan(text) == found
    assert native.code_spans(text) == blocks.code_spans_py(text)
    assert blocks.mask_code(text, found) == blocks.mask_code_py(text, found)


def test_the_masked_str_is_as_narrow_as_python_makes_it():
    """Code that held the only wide code points leaves an ASCII str (an equal str of a
    wider kind would compare unequal in CPython)."""
    for text in ["a `é` b", "```\n😀\n```\nx", "`\ud800`", "x `€` é"]:
        masked = blocks.mask_code(text)
        assert masked == blocks.mask_code_py(text, blocks.scan_py(text))
        assert masked.isascii() == all(ord(c) < 128 for c in masked)


def test_escapes_that_shorten_a_run_and_blank_lines_between():
    for text in [
        "\\``a`",
        "\\```a``",
        "`a\n\nb`",
        "``a` b``",
        "\\\\`a`",
        "x\\```` y ```",
        "`` ` ``",
        "\\`` \\`` `` ``` `",
        "\\" + "``" * 50 + "`",
    ]:
        assert native.code_spans(text) == blocks.code_spans_py(text), text


def test_fences_out_of_order_are_refused_not_misread():
    with pytest.raises(ValueError):
        native.mask_code("abc\ndef\n", ((4, 8), (0, 4)))


# Pieces of Markdown links: every character the pattern branches on, targets with and
# without '%', schemes, anchors, relative paths and extensions, Unicode spaces (\s).
_LINK_PIECES = st.sampled_from(
    [
        "[",
        "]",
        "](",
        "(",
        ")",
        "<",
        ">",
        "!",
        "\\",
        '"',
        ' "t"',
        " ",
        "\t",
        "\n",
        "\u00a0",
        "\u2003",
        "a",
        "Note",
        "b.md",
        "c.MD",
        "x.png",
        "../",
        "./",
        "/abs",
        "#h",
        "http:",
        "https://e.org/p",
        "c++:x",
        "1a:",
        "%20",
        "%2E%2Emd",
        "%68ttp:",
        "%",
        "|",
        "é",
        "😀",
        "\ud800",
    ]
)


_TARGET_PIECES = st.sampled_from(
    [".", "..", "./", "../", "/", "//", "a", "Bé", ".md", ".MD", ".mD", "md", "M", "D", "x.png"]
    + ["#", "#h", " ", "\u2003", "\u00a0", "İ", "%", "%2e", "http:", "c++:", "1a:", "😀", "\ud800"]
)
_FOLDERS = st.sampled_from(["", "d", "d/e", "d/e/", "/r", "//r", "///r", "..", "../d", "d/..", "."])
_BITS = st.lists(_LINK_PIECES, max_size=4).map("".join)
_SPACE = st.sampled_from(["", " ", "\t", "\n", "\u00a0"])
# Link-shaped text (most random strings hold no link at all), with stray pieces between.
_LINKS = st.lists(
    st.one_of(
        _LINK_PIECES,
        st.builds(
            "{}[{}]({}{}{}{}{}{})".format,
            st.sampled_from(["", "!", "\\", "\\!", "\\\\"]),
            _BITS,
            _SPACE,
            st.sampled_from(["", "<"]),
            _BITS,
            st.sampled_from(["", ">"]),
            st.sampled_from(["", ' "t"', '  "a b" ', ' "x']),
            _SPACE,
        ),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=5000, deadline=None)
@given(_LINKS, _FOLDERS)
def test_markdown_links_are_the_python_ones(text: str, folder: str) -> None:
    assert links._markdown_links(text, folder) == links.markdown_links_py(text, folder)


@settings(max_examples=5000, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 9),
            st.booleans(),
            st.lists(st.sampled_from([" ", "\u2003", "t", "é", "#"]), max_size=4).map("".join),
            st.lists(_TARGET_PIECES, max_size=8).map("".join),
        ),
        max_size=6,
    ),
    _FOLDERS,
)
def test_note_links_decides_as_the_python(found: list, folder: str) -> None:
    """Every target, not only those md_links lets through: normpath's rules, '.md' in any
    case, attachments, anchors, schemes, Unicode spaces; '%' left to the Python."""
    decided = []
    for item in native.note_links(found, folder):
        if len(item) == 5:
            decided.append((item[0], links.Link(*item[1:])))
        else:
            assert "%" in item[3]
            decided += links._note_links([item], folder)
    assert decided == links._note_links(found, folder)


def test_markdown_link_forms():
    for text in [
        '[a](b.md) ![c](<d e.md> "t") [f](g "h" ) [i]( j ) \\[k](l)',
        "[a](%2E%2E/b.md) [a](%68ttp:x) [z](http://x) [y](#h) [w](/x) [v](x.png)",
        "[a](<b>x) [a](<>) [a](b\n) [a](\nb.md\n) [a\nb](c) [[a](b)",
        "\\![a](b) \\\\![a](b) ![a](../../c.md#h)",
    ]:
        for folder in ("", "d/e"):
            found = links._markdown_links(text, folder)
            assert found == links.markdown_links_py(text, folder), text
    assert links._markdown_links("[a](b.md)", "")[0][1].target == "b"


# What the language detection's sample leaves out: fences at line starts (closed or not,
# ``` or ~~~, longer runs), inline code, URLs, link targets, tags; Unicode spaces for \S.
_SAMPLE_PIECES = st.sampled_from(
    [
        "```",
        "````",
        "~~~",
        "`",
        "\n",
        "\n```\n",
        "\n~~~x\n",
        "<",
        ">",
        "<b>",
        "](",
        "]",
        "(",
        ")",
        "http://",
        "https://",
        "https",
        "http",
        ":",
        "/",
        "x",
        " ",
        "\u00a0",
        "\u2028",
        "é",
        "😀",
        "\ud800",
    ]
)


@settings(max_examples=4000, deadline=None)
@given(st.lists(_SAMPLE_PIECES, max_size=50).map("".join), st.integers(1, 400))
def test_the_detection_sample_is_the_python_one(text: str, repeat: int) -> None:
    assert analysis._detection_sample(text) == analysis.detection_sample_py(text)
    longer = text * repeat  # past the sample's 2 x 2,500 characters, cut mid-pattern
    assert analysis._detection_sample(longer) == analysis.detection_sample_py(longer)


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "bc", " ", "\t", "\n", "\n\n", "é", "€", "😀"]), max_size=30),
    st.lists(st.integers(0, 140), min_size=1, max_size=40),
    st.data(),
)
def test_the_chunkers_cut_is_the_python_one(pieces: list[str], cuts: list[int], data) -> None:
    import numpy as np

    body = "".join(pieces).encode("utf-8")
    offsets = np.array(sorted([0, *cuts]), dtype=np.int64)  # some past the end, some inside
    cutter = chunking._Cutter(body, offsets)
    hi = data.draw(st.integers(0, len(offsets) - 1))
    lo = data.draw(st.integers(0, len(offsets)))  # lo > hi: nothing scanned
    assert native.best_cut(body, offsets, hi, lo) == cutter.best_py(hi, lo)


_PARSE_ALL = """
import hashlib, json, sys, tarfile
from vault_brain.index.chunking import chunk_note
from vault_brain.text.analysis import _detection_sample
from vault_brain.vault import blocks, frontmatter, note as note_mod
from vault_brain.vault.note import UnreadableNote, extract_lead, parse_note
native = None not in (blocks._native, note_mod._native, frontmatter._native)
def meta(raw):  # the frontmatter block's whole value, not only the keys a Note keeps
    split = frontmatter.split_frontmatter(raw.decode("utf-8").removeprefix("\ufeff"))
    if split is None or not split.closed:
        return ""
    try:
        return repr(frontmatter.load_block(note_mod._newlines(split.block)))
    except Exception as exc:
        return type(exc).__name__ + str(exc)
out = {"native": native, "notes": {}}
for archive in sys.argv[1:]:
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".md"):
                raw = tar.extractfile(member).read()
                try:
                    note = parse_note(member.name, raw)
                    sample = _detection_sample(f"{note.title}\\n\\n{note.body}")
                    chunks = chunk_note(note.title, note.body, 400, 48, 64, note.headings)
                    whole = extract_lead(note.body, 10**9)  # every line, not the first
                    text = repr(note) + repr(sample) + repr(chunks) + whole + meta(raw)
                except UnreadableNote as exc:
                    text = "unreadable " + str(exc)
                data = text.encode("utf-8", "surrogatepass")
                out["notes"][member.name] = hashlib.sha256(data).hexdigest()
print(json.dumps(out))
"""


def _parse_all(archives: list[Path], native_on: bool) -> dict:
    env = {**os.environ, "VAULT_BRAIN_NATIVE": "1" if native_on else "0"}
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_ALL, *map(str, archives)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.slow
def test_every_note_of_the_corpora_parses_the_same_with_and_without_c():
    """parse_note's Note, the language detection's sample, the chunks, the lead of every
    line (_mdlead.c) and the frontmatter's whole value (_frontmatter.c) of every note."""
    archives = [
        corpus(name)
        for name in ("cpp-docs.tar.gz", "obsidian-help.tar.gz", "obsidian-help-i18n.tar.gz")
    ]
    with_c = _parse_all(archives, True)
    without = _parse_all(archives, False)
    assert with_c["native"] and not without["native"]
    assert len(with_c["notes"]) > 10_000
    differ = [name for name, h in with_c["notes"].items() if without["notes"].get(name) != h]
    assert differ == []
    assert with_c["notes"].keys() == without["notes"].keys()
