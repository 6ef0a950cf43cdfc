"""Obsidian syntax in a note body: wikilinks, embeds and inline #tags, never inside code.

Everything here works on a "masked" copy of the body in which fenced code blocks and
inline code spans are blanked out (same length, newlines kept), so C++ attributes such as
`[[nodiscard]]` in code are never read as links and offsets still line up with the text.
"""

from __future__ import annotations

import bisect
import posixpath
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True)
class Link:
    target: str  # note name or path as written, without .md, e.g. "Folder/Note"
    heading: str | None  # [[a#h]]
    alias: str | None  # [[a|b]]
    embed: bool  # ![[...]]


# A fence opens a code block: ``` or ~~~ (3 or more). Any indentation and blockquote
# markers are accepted, so fences nested in list items and callouts count as code too.
# Possessive runs (*+): nothing after them can use what they give back, and without them a
# line of 60k spaces took minutes (each split of the run between the two [ \t]* was tried).
_FENCE_OPEN = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(?P<fence>`{3,}+|~{3,}+)(?P<info>.*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(?P<fence>`{3,}+|~{3,}+)[ \t]*+$")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE_AT = re.compile(r"(?=\n[ \t]*+\n)")
_WIKILINK = re.compile(r"(?P<bang>!?)\[\[(?P<inner>[^\[\]\n]+?)\]\]")
_TAG_START = re.compile(r"(?<!\S)#(?P<run>[^\s#]+)")
_TAG_PUNCT = frozenset("_-/")
_ZWJ = "\u200d"


def fenced_lines(lines: list[str]) -> list[bool]:
    """Per line: True when it belongs to a fenced code block (fence lines included).

    An unclosed fence runs to the end of the text, as in CommonMark.
    """
    flags = [False] * len(lines)
    fence_char = ""
    fence_len = 0
    for i, line in enumerate(lines):
        if fence_char:
            flags[i] = True
            close = _FENCE_CLOSE.match(line)
            if close and close.group("fence")[0] == fence_char:
                if len(close.group("fence")) >= fence_len:
                    fence_char = ""
            continue
        m = _FENCE_OPEN.match(line)
        if m is None:
            continue
        fence = m.group("fence")
        if fence[0] == "`" and "`" in m.group("info"):
            continue  # ```code``` on one line is an inline span, not a fence
        fence_char, fence_len = fence[0], len(fence)
        flags[i] = True
    return flags


def mask_code(text: str) -> str:
    """Blank out fenced code blocks and inline code spans, keeping length and newlines."""
    lines = text.split("\n")
    flags = fenced_lines(lines)
    if any(flags):
        lines = [
            " " * len(line) if fenced else line for line, fenced in zip(lines, flags, strict=True)
        ]
        text = "\n".join(lines)
    if "`" not in text:
        return text
    return _mask_code_spans(text)


def _mask_code_spans(text: str) -> str:
    """Blank out inline code spans (see code_spans), keeping length and newlines."""
    out = list(text)
    for start, _, _, end in code_spans(text):
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


def code_spans(text: str) -> list[tuple[int, int, int, int]]:
    """CommonMark code spans: a run of n backticks closes at the next run of exactly n, before
    a blank line; "\\`" is a literal backtick. (start, content start, content end, end) each.

    Linear: every run and blank line is found once and closers are looked up by width, so
    thousands of unmatched backticks cost no more than reading them.
    """
    if "`" not in text:
        return []
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    starts = [start for start, _ in runs]
    by_width: dict[int, list[int]] = {}
    for i, (start, end) in enumerate(runs):
        by_width.setdefault(end - start, []).append(i)
    blanks = [m.start() for m in _BLANK_LINE_AT.finditer(text)]
    spans = []
    pos = 0
    i = 0
    while i < len(runs):
        start, end = runs[i]
        start = max(start, pos)
        if start >= end:
            i += 1
            continue
        if _escaped(text, start):
            pos = start + 1  # "\`" is a literal backtick; the rest of the run may still open
            continue
        b = bisect.bisect_left(blanks, end)
        limit = blanks[b] if b < len(blanks) else len(text)
        same = by_width.get(end - start, [])
        j = bisect.bisect_right(same, i)
        if j == len(same) or runs[same[j]][1] > limit:
            pos = end  # no matching run: these backticks are literal
            i += 1
            continue
        close_start, close_end = runs[same[j]]
        spans.append((start, end, close_start, close_end))
        pos = close_end
        i = bisect.bisect_right(starts, close_start)
    return spans


def _escaped(text: str, index: int) -> bool:
    """True when the character at index is preceded by an odd number of backslashes."""
    count = 0
    i = index - 1
    while i >= 0 and text[i] == "\\":
        count += 1
        i -= 1
    return count % 2 == 1


def extract_links(text: str, masked: str | None = None, folder: str = "") -> tuple[Link, ...]:
    """Wikilinks, embeds and Markdown links to notes, in order of first appearance, each
    distinct link once. `folder` is the note's own folder, for `../` Markdown links.

    Same-note links ([[#heading]], (#heading)) are skipped; escaped \\[[ is not a link; web
    addresses and attachments other than notes are not links to notes.
    """
    if masked is None:
        masked = mask_code(text)
    found: list[tuple[int, Link]] = []
    if "[[" in masked:
        found += _wikilinks(masked)
    if "](" in masked:
        found += _markdown_links(masked, folder)
    found.sort(key=lambda pair: pair[0])
    seen: set[Link] = set()
    links: list[Link] = []
    for _, link in found:
        if link not in seen:
            seen.add(link)
            links.append(link)
    return tuple(links)


# [text](target) and ![text](target); the target may be <wrapped> and carry a "title".
_MD_LINK = re.compile(
    r"(?P<bang>!?)\[(?P<text>[^\[\]\n]*)\]\(\s*(?:<(?P<wrapped>[^<>\n]+)>|(?P<bare>[^\s()<>]+))"
    r"(?:\s+\"[^\"\n]*\")?\s*\)"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _markdown_links(masked: str, folder: str) -> list[tuple[int, Link]]:
    """Markdown links whose target is a note in the vault (.md or no extension)."""
    out = []
    for m in _MD_LINK.finditer(masked):
        if _escaped(masked, m.start("bang") if m.group("bang") else m.start()):
            continue
        raw = unquote(m.group("wrapped") or m.group("bare") or "")
        if not raw or _SCHEME.match(raw) or raw.startswith(("#", "/")):
            continue
        raw, _, heading = raw.partition("#")
        name = posixpath.basename(raw)
        if name.lower().endswith(".md"):
            raw = raw[:-3]
        elif "." in name:
            continue  # an attachment (image, PDF), not a note
        if raw.startswith(("./", "../")):
            raw = posixpath.normpath(posixpath.join(folder, raw))
            while raw.startswith("../"):
                raw = raw[3:]
        target = raw.strip()
        if not target:
            continue
        alias = m.group("text").strip() or None
        embed = bool(m.group("bang"))
        out.append((m.start(), Link(target, heading.strip() or None, alias, embed)))
    return out


def _wikilinks(masked: str) -> list[tuple[int, Link]]:
    out = []
    for m in _WIKILINK.finditer(masked):
        embed = bool(m.group("bang"))
        bracket = m.start("inner") - 2
        if _escaped(masked, bracket):
            continue
        if embed and _escaped(masked, m.start()):
            embed = False  # "\![[x]]" shows a literal "!" before an ordinary link
        link = _parse_inner(m.group("inner"), embed)
        if link is not None:
            out.append((m.start(), link))
    return out


def _parse_inner(inner: str, embed: bool) -> Link | None:
    alias: str | None = None
    if "|" in inner:
        inner, alias_text = inner.split("|", 1)
        if inner.endswith("\\"):
            inner = inner[:-1]  # [[a\|b]] is how Obsidian writes an alias inside a table
        alias = alias_text.strip() or None
    heading: str | None = None
    if "#" in inner:
        inner, heading_text = inner.split("#", 1)
        heading = heading_text.strip() or None
    target = inner.strip()
    if target.lower().endswith(".md"):
        target = target[:-3].rstrip()
    if not target:
        return None  # [[#heading]] points into the same note
    return Link(target=target, heading=heading, alias=alias, embed=embed)


def extract_tags(text: str, masked: str | None = None) -> tuple[str, ...]:
    """Inline #tags by Obsidian's rules, lowercased, without '#', unique, sorted.

    A tag starts at '#' after whitespace or line start (so URL fragments, headings
    '# x' and [[note#heading]] are not tags) and has at least one non-digit.
    """
    if masked is None:
        masked = mask_code(text)
    if "#" not in masked:
        return ()
    tags: set[str] = set()
    for m in _TAG_START.finditer(masked):
        tag = normalize_tag(m.group("run"))
        if tag:
            tags.add(tag)
    return tuple(sorted(tags))


def normalize_tag(raw: str) -> str | None:
    """The tag named by raw (leading '#' allowed), cut at the first non-tag character."""
    raw = unicodedata.normalize("NFC", raw.strip().lstrip("#"))
    end = 0
    for ch in raw:
        if not _is_tag_char(ch):
            break
        end += 1
    tag = raw[:end].rstrip("/").lower()
    if not tag or all(ch.isdigit() or ch in _TAG_PUNCT for ch in tag):
        return None
    return tag


def _is_tag_char(ch: str) -> bool:
    if ch in _TAG_PUNCT or ch == _ZWJ:
        return True
    category = unicodedata.category(ch)
    # Letters (any script), combining marks (Thai, Devanagari), digits, emoji symbols.
    return category[0] in "LMN" or category == "So"
