"""Snippets: a short window of plain text from the chunk that matched, around the first
query word found, so a model sees why a note was returned without reading it."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Linear on any input (a regex that scans to the end once per '[' or '<!--' is quadratic):
# bracket classes exclude '[', link targets allow one level of parentheses, per-line
# patterns never run past a line end, and comments are cut by str.find.
_PARENS = r"\((?:[^()]|\([^()]*\))*\)"
_MARKUP = [  # (pattern, replacement, a literal the pattern cannot match without)
    (re.compile(r"```.*?```", re.S), " ", "```"),
    (re.compile(r"!\[\[[^\[\]]*\]\]"), " ", "![["),
    (re.compile(r"\[\[([^\[\]|#]*)(?:#[^\[\]|]*)?\|([^\[\]]*)\]\]"), r"\2", "[["),
    (re.compile(r"\[\[([^\[\]|#]*)(?:#([^\[\]|]*))?\]\]"), r"\1", "[["),
    (re.compile(r"!\[[^\[\]]*\]" + _PARENS), " ", "!["),
    (re.compile(r"\[([^\[\]]*)\]" + _PARENS), r"\1", "]("),
    (None, " ", "<!--"),  # comments
    (re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M), "", "#"),
    (re.compile(r"^[ \t]*+(?:[-*+]|\d++[.)])[ \t]++(?:\[[ xX]\][ \t]+)?", re.M), "", ""),
]
# Then every run of emphasis marks and whitespace becomes one space: a translate and a
# split (14 µs a chunk) where two regex passes took 38 µs, a third of a snippet.
_MARKS_TO_SPACES = str.maketrans(dict.fromkeys("*_`~>|", " "))


def _drop_comments(text: str, repl: str) -> str:
    """`<!-- ... -->` out; an unclosed one stays (as the regex `<!--.*?-->` left it)."""
    parts = []
    pos = 0
    while (start := text.find("<!--", pos)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break
        parts += [text[pos:start], repl]
        pos = end + 3
    return "".join(parts) + text[pos:] if parts else text


def plain_text(markdown: str) -> str:
    text = markdown
    for pattern, repl, literal in _MARKUP:
        if literal not in text:  # most chunks have no links, fences or headings
            continue
        text = _drop_comments(text, repl) if pattern is None else pattern.sub(repl, text)
    return " ".join(text.translate(_MARKS_TO_SPACES).split())


def make_snippet(text: str, terms: Sequence[str], max_chars: int = 240) -> str:
    """A window of plain text around the first query term found (else the start)."""
    plain = plain_text(text)
    if len(plain) <= max_chars:
        return plain
    lower = plain.lower()
    pos = -1
    for term in terms:
        t = term.lower()
        for probe in (t, t[:5] if len(t) > 5 else None):
            if probe:
                p = lower.find(probe)
                if p >= 0 and (pos < 0 or p < pos):
                    pos = p
                    break
    start = 0 if pos < 0 else max(0, pos - max_chars // 3)
    if start > 0:
        space = plain.find(" ", start)
        if 0 <= space < start + 20:
            start = space + 1
    end = start + max_chars - (1 if start else 0) - 1
    snippet = plain[start:end]
    if end < len(plain):
        cut = snippet.rfind(" ")
        if cut > len(snippet) * 0.7:
            snippet = snippet[:cut]
        snippet += "…"
    return ("…" + snippet) if start else snippet
