"""Obsidian syntax in a note body: wikilinks, embeds and inline #tags, never inside code.

Everything here works on a "masked" copy of the body in which fenced code blocks and
inline code spans are blanked out (same length, newlines kept), so C++ attributes such as
`[[nodiscard]]` in code are never read as links and offsets still line up with the text.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass
from operator import itemgetter
from urllib.parse import unquote

from vault_brain.vault.blocks import _native, escaped, many, mask_code


@dataclass(frozen=True)
class Link:
    target: str  # note name or path as written, without .md, e.g. "Folder/Note"
    heading: str | None  # [[a#h]]
    alias: str | None  # [[a|b]]
    embed: bool  # ![[...]]


# Every pattern that scans a whole body starts with a literal character, so the regex engine
# jumps from one '[' or '#' to the next instead of trying a match at every position (a
# leading `!?` or lookbehind hides the literal from it: 10-20x slower on cpp-docs). An
# embed's '!' is read from the character before the match; a tag's "whitespace or line
# start before '#'" is a lookbehind placed after the '#'.
_WIKILINK = re.compile(r"\[\[(?P<inner>[^\[\]\n]+?)\]\]")
_TAG_START = re.compile(r"#(?<!\S#)(?P<run>[^\s#]+)")
_TAG_PUNCT = frozenset("_-/")
_ZWJ = "\u200d"


def extract_links(text: str, masked: str | None = None, folder: str = "") -> tuple[Link, ...]:
    """Wikilinks, embeds and Markdown links to notes, in order of first appearance, each
    distinct link once. `folder` is the note's own folder, for `../` Markdown links.

    Same-note links ([[#heading]], (#heading)) are skipped; escaped \\[[ is not a link; web
    addresses and attachments other than notes are not links to notes.
    """
    if masked is None:
        masked = mask_code(text)
    # Each link as its fields (target, heading, alias, embed): a Link is equal to another and
    # hashes as they do, so the distinct fields are the distinct links, and only those are
    # made into Links (a frozen dataclass's __init__ and __hash__ run in Python).
    found: list[tuple[int, tuple]] = []
    if "[[" in masked:
        found += [(start, _fields(link)) for start, link in _wikilinks(masked)]
    if "](" in masked:
        found += _markdown_link_fields(masked, folder)
    found.sort(key=_START)
    return tuple(_links(list(dict.fromkeys(fields for _, fields in found))))


_links = many(Link)


def _fields(link: Link) -> tuple:
    return (link.target, link.heading, link.alias, link.embed)


_START = itemgetter(0)


def _markdown_link_fields(masked: str, folder: str) -> list[tuple[int, tuple]]:
    """_markdown_links as (start, fields), without a Link made for each."""
    if _native is None:
        return [(start, _fields(link)) for start, link in markdown_links_py(masked, folder)]
    out: list[tuple[int, tuple]] = []
    for item in _native.note_links(_native.md_links(masked), folder):
        if len(item) == 5:
            out.append((item[0], item[1:]))
        else:
            out += [(start, _fields(link)) for start, link in _note_links([item], folder)]
    return out


# [text](target) and ![text](target); the target may be <wrapped> and carry a "title".
_MD_LINK = re.compile(
    r"\[(?P<text>[^\[\]\n]*)\]\(\s*(?:<(?P<wrapped>[^<>\n]+)>|(?P<bare>[^\s()<>]+))"
    r"(?:\s+\"[^\"\n]*\")?\s*\)"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _bang_start(masked: str, at: int) -> int:
    """Where a link found at `at` starts: one character earlier when a '!' (an embed's
    mark, which the patterns leave out so that they start with a literal) precedes it."""
    return at - 1 if at and masked[at - 1] == "!" else at


def _markdown_links(masked: str, folder: str) -> list[tuple[int, Link]]:
    """Markdown links whose target is a note in the vault (.md or no extension)."""
    if _native is None:
        return markdown_links_py(masked, folder)
    # The same links (vault_brain/native/_mdscan.c): md_links finds them, note_links decides
    # what _note_links would of each, but of a target with a '%' (unquote's).
    out = []
    for item in _native.note_links(_native.md_links(masked), folder):
        if len(item) == 5:
            out.append((item[0], Link(*item[1:])))
        else:
            out += _note_links([item], folder)
    return out


def markdown_links_py(masked: str, folder: str) -> list[tuple[int, Link]]:
    """_markdown_links() in Python: the fallback, and the reference of the C one."""
    found = []
    for m in _MD_LINK.finditer(masked):
        start = _bang_start(masked, m.start())  # ![text](target)
        if not escaped(masked, start):
            raw = m.group("wrapped") or m.group("bare") or ""
            found.append((start, start < m.start(), m.group("text"), raw))
    return _note_links(found, folder)


def _note_links(found: list[tuple[int, bool, str, str]], folder: str) -> list[tuple[int, Link]]:
    """The links to notes among (start, embed, text, target) of Markdown links."""
    out = []
    for start, embed, text, target in found:
        raw = unquote(target)
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
        alias = text.strip() or None
        out.append((start, Link(target, heading.strip() or None, alias, embed)))
    return out


def _wikilinks(masked: str) -> list[tuple[int, Link]]:
    out = []
    for m in _WIKILINK.finditer(masked):
        bracket = m.start()
        start = _bang_start(masked, bracket)  # ![[embed]]
        embed = start < bracket
        if escaped(masked, bracket):
            continue
        if embed and escaped(masked, start):
            embed = False  # "\![[x]]" shows a literal "!" before an ordinary link
        link = _parse_inner(m.group("inner"), embed)
        if link is not None:
            out.append((start, link))
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
