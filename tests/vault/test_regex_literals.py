"""The parse's whole-body patterns start with a literal character so the regex engine can skip
ahead (issue 23): each finds exactly what the pattern it replaced found. The old patterns are
kept here as the reference."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault import blocks, links, note

OLD_WIKILINK = re.compile(r"(?P<bang>!?)\[\[(?P<inner>[^\[\]\n]+?)\]\]")
OLD_TAG_START = re.compile(r"(?<!\S)#(?P<run>[^\s#]+)")
OLD_MD_LINK = re.compile(
    r"(?P<bang>!?)\[(?P<text>[^\[\]\n]*)\]\(\s*(?:<(?P<wrapped>[^<>\n]+)>|(?P<bare>[^\s()<>]+))"
    r"(?:\s+\"[^\"\n]*\")?\s*\)"
)
OLD_BLANK_LINE_AT = re.compile(r"(?=\n[ \t]*+\n)")
OLD_EMPHASIS = re.compile(
    rf"(?<![\w*])\*(?=\S)(.{{1,{note._SPAN}}}?)(?<=\S)\*(?![\w*])"
    rf"|(?<!\w)_(?=\S)(.{{1,{note._SPAN}}}?)(?<=\S)_(?!\w)"
)

markdown = st.text('![]()#\\ \n\ta_*<>"|.md/x9é', max_size=60)


def _with_bang(pattern: re.Pattern[str], text: str, *groups: str) -> list[tuple]:
    """(where the link starts, its '!', its groups) as the old patterns reported them."""
    out = []
    for m in pattern.finditer(text):
        start = m.start()
        bang = bool(start and text[start - 1] == "!")
        out.append((start - bang, bang, *(m.group(g) for g in groups)))
    return out


@settings(max_examples=3000, deadline=None)
@given(markdown)
def test_wikilinks_are_found_where_they_were(text):
    old = [(m.start(), bool(m["bang"]), m["inner"]) for m in OLD_WIKILINK.finditer(text)]
    assert _with_bang(links._WIKILINK, text, "inner") == old


@settings(max_examples=3000, deadline=None)
@given(markdown)
def test_markdown_links_are_found_where_they_were(text):
    groups = ("text", "wrapped", "bare")
    old = [(m.start(), bool(m["bang"]), *m.group(*groups)) for m in OLD_MD_LINK.finditer(text)]
    assert _with_bang(links._MD_LINK, text, *groups) == old


@settings(max_examples=3000, deadline=None)
@given(markdown)
def test_tags_start_where_they_did(text):
    def spans(pattern: re.Pattern[str]) -> list[tuple]:
        return [(m.span(), m["run"]) for m in pattern.finditer(text)]

    assert spans(links._TAG_START) == spans(OLD_TAG_START)


@settings(max_examples=3000, deadline=None)
@given(st.text(" \t\nab`", max_size=60))
def test_blank_lines_are_found_where_they_were(text):
    def starts(pattern: re.Pattern[str]) -> list[int]:
        return [m.start() for m in pattern.finditer(text)]

    assert starts(blocks._BLANK_LINE_AT) == starts(OLD_BLANK_LINE_AT)


@settings(max_examples=3000, deadline=None)
@given(st.text("ab *_\n.", max_size=40))
def test_emphasis_is_removed_as_it_was(text):
    def strip(pattern: re.Pattern[str]) -> str:
        return pattern.sub(lambda m: m.group(1) or m.group(2), text)

    assert strip(note._EMPHASIS) == strip(OLD_EMPHASIS)


def test_embeds_escapes_and_order_of_links_are_kept():
    """What the code before this change extracted from the same text."""
    text = (
        "![[Embed]] \\![[Plain]] \\[[Escaped]] [[A#h|b]] !![[Twice]] "
        '![img](pic.png) ![n](Note.md) \\![m](Other) [x](<Wrapped Note.md> "t") '
        "[![i](a.png)](Inside.md) #tag a#not #1 #ok/yes"
    )
    found = links.extract_links(text)
    assert [(ln.target, ln.embed) for ln in found] == [
        ("Embed", True),
        ("Plain", False),
        ("A", False),
        ("Twice", True),
        ("Note", True),
        ("Wrapped Note", False),  # "\\![m](Other)": an escaped '!' hides the link, as before
    ]
    assert links.extract_tags(text) == ("ok/yes", "tag")
