"""The Note record and how a Markdown file becomes one.

Parsing never fails on what a person may type: malformed frontmatter, odd dates or
a stray BOM still give a Note (indexed from its text) plus warnings. Only bytes that
are not UTF-8 are refused, with UnreadableNote, because their text cannot be known.
Warnings name the problem, never the note's text.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import yaml

from vault_brain.errors import VaultBrainError
from vault_brain.native import load
from vault_brain.vault.blocks import Blocks, Heading, code_spans, mask_code, scan
from vault_brain.vault.blocks import _native as _scan_native
from vault_brain.vault.frontmatter import (
    LOAD_ERRORS,
    TooManyValues,
    load_block,
    split_frontmatter,
)
from vault_brain.vault.links import Link, extract_links, extract_tags, normalize_tag

__all__ = [
    "Link",
    "Note",
    "UnreadableNote",
    "derived_id",
    "extract_lead",
    "file_version",
    "new_id",
    "parse_note",
]

LEAD_CHARS = 300


class UnreadableNote(VaultBrainError):
    """The file's bytes are not UTF-8 text; it is skipped with a warning, never guessed."""


@dataclass(frozen=True)
class Note:
    path: str  # vault-relative POSIX path, e.g. "Projects/Alpha.md"
    id: str  # frontmatter id, else derived_id(path)
    title: str  # frontmatter title, else first "# " heading, else file stem
    summary: str  # frontmatter summary, else "" (the indexer fills lead/LLM)
    lead: str  # extractive lead (<= 300 chars), deterministic
    created: str | None  # ISO 8601 UTC "2026-11-30T14:10:00Z" from frontmatter, else None
    updated: str | None  # ISO 8601 UTC from frontmatter, else None
    tags: tuple[str, ...]  # frontmatter tags + inline #tags, lowercased, no '#', unique, sorted
    aliases: tuple[str, ...]
    links: tuple[Link, ...]
    body: str  # the Markdown after the frontmatter, line endings normalised to "\n"
    version: str  # 12 hex chars of blake2b(file bytes)
    content_hash: str  # 32 hex chars of blake2b(file bytes)
    frontmatter_ok: bool  # False when frontmatter was malformed (note indexed from its text)
    warnings: tuple[str, ...]
    headings: tuple[Heading, ...] = ()  # ATX headings of the body outside code (for chunking)


def file_version(raw: bytes) -> str:
    """The short version every read returns and every update must name."""
    return hashlib.blake2b(raw, digest_size=6).hexdigest()


def content_hash(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_id() -> str:
    """8 random base36 chars for a new note's frontmatter, the first a letter. YAML reads
    ids such as `12345678` or `0xbb2fc7` as numbers, so they were written quoted (one save
    in ~25,000), and a client may send such an id as a JSON number."""
    return secrets.choice(_BASE36[10:]) + "".join(secrets.choice(_BASE36) for _ in range(7))


def derived_id(path: str) -> str:
    """8 base36 chars from the NFC vault-relative path: short for models, stable forever.

    Depends on nothing but the path (case kept), so reindexing never changes it. Total:
    a name that is not UTF-8 (undecodable bytes arrive as lone surrogates) still gets one.
    """
    data = unicodedata.normalize("NFC", path).encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(data, digest_size=8)
    number = int.from_bytes(digest.digest(), "big") % 36**8
    chars = []
    for _ in range(8):
        number, rest = divmod(number, 36)
        chars.append(_BASE36[rest])
    return "".join(reversed(chars))


def parse_note(path: str, raw: bytes) -> Note:
    """Build the Note for the file at vault-relative `path` from its bytes."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableNote(
            f"{path}: not valid UTF-8 (bad byte at offset {exc.start}); file skipped",
            path=path,
        ) from exc
    text = text.removeprefix("\ufeff")

    warnings: list[str] = []
    meta, body, frontmatter_ok = _split_frontmatter(text, warnings)
    blocks = scan(body)  # one scan of fences and headings, read by everything below
    masked = mask_code(body, blocks)
    inline_tags = extract_tags(body, masked)

    return Note(
        path=path,
        id=_note_id(meta, path, warnings),
        title=_title(meta, blocks, path),
        summary=_plain_string(meta.get("summary")),
        lead=extract_lead(body, blocks=blocks),
        created=_timestamp(meta, ("created", "date"), warnings),
        updated=_timestamp(meta, ("updated", "modified"), warnings),
        tags=tuple(sorted(set(_frontmatter_tags(meta)) | set(inline_tags))),
        aliases=_aliases(meta),
        links=extract_links(body, masked, posixpath.dirname(path)),
        body=body,
        version=file_version(raw),
        content_hash=content_hash(raw),
        frontmatter_ok=frontmatter_ok,
        warnings=tuple(warnings),
        headings=blocks.headings,
    )


# --- frontmatter -------------------------------------------------------------------------


def _split_frontmatter(text: str, warnings: list[str]) -> tuple[dict[str, Any], str, bool]:
    """(metadata with lowercased keys, body with "\n" line ends, ok), by the one reader
    the updater uses too (vault/frontmatter.py)."""
    parts = split_frontmatter(text)
    if parts is None:
        return {}, _newlines(text), True
    if not parts.closed:
        warnings.append("frontmatter: opening '---' is never closed; whole file read as text")
        return {}, _newlines(text), False
    body = _newlines(parts.body)
    try:
        data = load_block(_newlines(parts.block))
    except yaml.YAMLError as exc:
        warnings.append(f"frontmatter: invalid YAML{_yaml_where(exc)}")
        return {}, body, False
    except TooManyValues as exc:
        warnings.append(f"frontmatter: not read, {exc}; the note is indexed from its text")
        return {}, body, False
    except LOAD_ERRORS as exc:
        warnings.append(f"frontmatter: YAML could not be loaded ({type(exc).__name__})")
        return {}, body, False
    if data is None:
        return {}, body, True
    if not isinstance(data, dict):
        warnings.append(f"frontmatter: expected key: value pairs, got a {type(data).__name__}")
        return {}, body, False
    meta: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).strip().lower()
        if name not in meta or str(key) == name:
            meta[name] = value
    return meta, body, True


def _newlines(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 2}" if mark is not None else ""  # +1 base, +1 for '---'
    return f"{where}: {problem}" if problem else where


def _plain_string(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _scalar_text(value: Any) -> str:
    """Text of a YAML scalar (title: 1984 is a number to YAML, a title to a person)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float | date) and not isinstance(value, bool):
        return str(value)
    return ""


def _note_id(meta: dict[str, Any], path: str, warnings: list[str]) -> str:
    value = meta.get("id")
    if value is None:
        return derived_id(path)
    text = (
        str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    )
    # An id that looks like a path would shadow that path in lookups: not honoured.
    if not text or any(ch.isspace() or ch in "/\\" for ch in text) or text.lower().endswith(".md"):
        warnings.append("frontmatter: id ignored (must be text without spaces, slashes or .md)")
        return derived_id(path)
    return text


def _string_list(value: Any) -> list[str]:
    """A YAML list (one level deep) or a single scalar, as stripped non-empty strings."""
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        text = _scalar_text(item)
        if text:
            out.append(text)
    return out


def _frontmatter_tags(meta: dict[str, Any]) -> list[str]:
    tags: list[str] = []
    for key in ("tags", "tag"):
        for item in _string_list(meta.get(key)):
            for word in re.split(r"[,\s]+", item):
                tag = normalize_tag(word)
                if tag:
                    tags.append(tag)
    return tags


def _aliases(meta: dict[str, Any]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for key in ("aliases", "alias"):
        for alias in _string_list(meta.get(key)):
            seen.setdefault(alias, None)
    return tuple(seen)


_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d", "%Y%m%d")


def _timestamp(meta: dict[str, Any], keys: tuple[str, ...], warnings: list[str]) -> str | None:
    """First parseable value among keys, as UTC 'YYYY-MM-DDTHH:MM:SSZ'; naive means UTC."""
    for key in keys:
        value = meta.get(key)
        if value is None or value == "":
            continue
        moment = _to_datetime(value)
        if moment is None:
            warnings.append(f"frontmatter: {key} is not a date or time; ignored")
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def _to_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


# --- title and lead ----------------------------------------------------------------------

TITLE_CHARS = 1000  # a heading longer than this is not a title (and costs no more to read)
_ATX_ANY = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")


def _title(meta: dict[str, Any], blocks: Blocks, path: str) -> str:
    title = _scalar_text(meta.get("title"))
    if title:
        return title
    for h in blocks.headings:
        if h.level == 1:
            heading = plain_inline(h.text[:TITLE_CHARS])
            if heading:
                return heading
    stem = path.rsplit("/", 1)[-1]
    return stem[:-3] if stem.lower().endswith(".md") else stem


_COMMENTS = re.compile(r"<!--.*?(?:-->|\Z)|%%.*?(?:%%|\Z)", re.DOTALL)
_RULE = re.compile(r"^(?:[-*_=][ \t]*){3,}$")
_TABLE_DELIMITER = re.compile(r"^\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?$")
_SKIPPED_LINE = re.compile(r"^(?:\[\^[^\]]+\]:|\[[^\]]+\]:\s|\$\$|<!--|-->)")
_QUOTE = re.compile(r"^(?:>[ \t]?)+")
_CALLOUT = re.compile(r"^\[![^\]]*\][-+]?\s*")
_BULLET = re.compile(r"^(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[.\][ \t]+)?")

# Linear on any input: bracket and angle classes exclude their own opener (so a run of 40k
# '[' is not scanned once per '['), link targets allow one level of parentheses, and
# emphasis spans are at most _SPAN characters long (a pair further apart stays as text).
_SPAN = 300
_PARENS = r"\((?:[^()\n]|\([^()\n]*\))*\)"
_EMBED = re.compile(r"!\[\[[^\[\]\n]*\]\]|!\[[^\[\]\n]*\]" + _PARENS)
_WIKI = re.compile(r"\[\[([^\[\]|#\n]*)(?:#([^\[\]|\n]*))?(?:\|([^\[\]\n]*))?\]\]")
_MD_LINK = re.compile(r"\[([^\[\]\n]*)\](?:" + _PARENS + r"|\[[^\[\]\n]*\])")
_FOOTNOTE = re.compile(r"\[\^[^\[\]\n]*\]")
_AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^<>\s]+)>")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_STRONG = re.compile(rf"(\*\*|__)(?=\S)(.{{1,{_SPAN}}}?)(?<=\S)\1")
_EMPHASIS = re.compile(
    # each branch starts with its literal, the lookbehind after it: the engine skips ahead
    rf"\*(?<![\w*]\*)(?=\S)(.{{1,{_SPAN}}}?)(?<=\S)\*(?![\w*])"
    rf"|_(?<!\w_)(?=\S)(.{{1,{_SPAN}}}?)(?<=\S)_(?!\w)"
)
_STRIKE_MARK = re.compile(rf"(~~|==)(?=\S)(.{{1,{_SPAN}}}?)(?<=\S)\1")
_BLOCK_ID = re.compile(r"\s\^[A-Za-z0-9-]+$")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_SPACES = re.compile(r"\s+")
_CODE_MARK = re.compile(r"\x00(\d+)\x00")  # where plain_inline set a code span aside


def _wiki_text(m: re.Match[str]) -> str:
    target, heading, alias = m.group(1), m.group(2), m.group(3)
    return (alias or target or heading or "").strip()


# The lead's loop, _lead_line and plain_inline in C (vault_brain/native/_mdlead.c), built by
# `pip install`; without it, or with VAULT_BRAIN_NATIVE=0, the Python below (the reference
# the tests compare it with) runs. It declines a text holding "\0" (None): the Python reads it.
_native = load("_mdlead")
_code_spans = _scan_native.code_spans if _scan_native is not None else code_spans


def plain_inline(text: str) -> str:
    """One line of Markdown as plain text: links become their words, markup goes."""
    if _native is not None:
        got = _native.plain_inline(text, _code_spans)
        if got is not None:
            return got
    return plain_inline_py(text)


def plain_inline_py(text: str) -> str:
    """plain_inline() in Python: the fallback, and the reference of the C one.

    Each pattern runs only when the text holds the character it cannot match without
    (most lines have no link, tag or markup): the same text, in a fraction of the time."""
    if "![" in text:
        text = _EMBED.sub(" ", text)
    codes: list[str] = []
    if "`" in text:
        parts = []
        pos = 0
        for start, inner_start, inner_end, end in code_spans(text):
            codes.append(text[inner_start:inner_end].strip())
            parts += [text[pos:start], f"\x00{len(codes) - 1}\x00"]
            pos = end
        text = "".join(parts) + text[pos:]
    if "[" in text:
        text = _WIKI.sub(_wiki_text, text)
        text = _MD_LINK.sub(lambda m: m.group(1), text)
        text = _FOOTNOTE.sub("", text)
    if "<" in text:
        text = _AUTOLINK.sub(lambda m: m.group(1), text)
        text = _HTML_TAG.sub(" ", text)
    if "*" in text or "_" in text:
        for _ in range(2):  # ***both*** needs two passes
            text = _STRONG.sub(lambda m: m.group(2), text)
            text = _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), text)
    if "~" in text or "=" in text:
        text = _STRIKE_MARK.sub(lambda m: m.group(2), text)
    if "^" in text:
        text = _BLOCK_ID.sub("", text)
    if "\\" in text:
        text = _ESCAPE.sub(lambda m: m.group(1), text)
    if codes:
        text = _CODE_MARK.sub(lambda m: codes[int(m.group(1))], text)
    return _SPACES.sub(" ", text).strip()


def extract_lead(body: str, limit: int = LEAD_CHARS, blocks: Blocks | None = None) -> str:
    """The opening prose of a body as plain text, cut to `limit` chars at a boundary.

    Headings, code, tables, embeds, comments and markup are left out, so the lead
    reads as the note's first words; the same body always gives the same lead.
    """
    if _native is not None and blocks is not None:
        got = _native.lead_text(body, blocks.fenced, limit, LEAD_CHARS * 8, _code_spans)
        # A comment that opens after the last line read changes none of the lines before
        # it (they and their fences are the same without it): no need to look further.
        if got is not None and body.find("<!--", 0, got[1] + 3) < 0:
            if body.find("%%", 0, got[1] + 1) < 0:
                return _cut(got[0], limit)
    if "<!--" in body or "%%" in body:
        body = _COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), body)
        blocks = None  # the comments are gone: what is code is scanned anew
    if blocks is None:
        blocks = scan(body)
    if _native is not None:
        got = _native.lead_text(body, blocks.fenced, limit, LEAD_CHARS * 8, _code_spans)
        if got is not None:
            return _cut(got[0], limit)
    return _cut(_lead_parts(body, limit, blocks), limit)


def _lead_parts(body: str, limit: int, blocks: Blocks) -> str:
    """extract_lead's text before the cut, in Python: the fallback, and the reference of
    the C one (_native.lead_text)."""
    # Which lines are fenced, found as the loop goes (it stops after 2 × limit characters
    # of prose: most of a long body is never looked at): fenced_lines' answer, line by line.
    spans, at, offset = blocks.fenced, 0, 0
    parts: list[str] = []
    length = 0
    for line in body.split("\n"):
        start, offset = offset, offset + len(line) + 1
        if spans:
            while at < len(spans) and start >= spans[at][1]:
                at += 1
            if at < len(spans) and spans[at][0] <= start:
                continue
        text = _lead_line(line)
        if text:
            parts.append(text)
            length += len(text) + 1
            if length > limit * 2:
                break
    return " ".join(parts)


def _lead_line(line: str) -> str:
    # The lead is LEAD_CHARS long: a few thousand characters of one line are plenty, and
    # reading no more keeps a 100 KB one-line note as cheap as a short one.
    stripped = line[: LEAD_CHARS * 8].strip()
    if not stripped or _ATX_ANY.match(stripped) or _RULE.match(stripped):
        return ""
    if stripped.startswith("|") or _TABLE_DELIMITER.match(stripped):
        return ""
    # each pattern needs its first character: most lines start with none of them
    if stripped[0] == ">":
        stripped = _QUOTE.sub("", stripped)
    if stripped.startswith("[!"):
        stripped = _CALLOUT.sub("", stripped)
    if stripped and (stripped[0] in "-*+" or stripped[0].isdecimal()):  # \d: any decimal
        stripped = _BULLET.sub("", stripped)
    if not stripped or _SKIPPED_LINE.match(stripped) or _ATX_ANY.match(stripped):
        return ""
    return plain_inline_py(stripped)


_SENTENCE_END = re.compile(r"[.!?…](?=\s)|[。！？]")


def _cut(text: str, limit: int) -> str:
    """Cut at the last sentence end, else word break, else (CJK) character, plus '…'."""
    text = text.strip()
    if len(text) <= limit:
        return text
    budget = limit - 2  # room for " …"
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, budget)]
    if ends and ends[-1] >= budget * 0.6:
        end = ends[-1]
        joiner = "" if text[end - 1] in "。！？" else " "
        return text[:end] + joiner + "…"
    space = text.rfind(" ", 0, budget + 1)
    if space >= budget * 0.5:
        return text[:space].rstrip(" ,;:-–—") + "…"
    return text[: limit - 1].rstrip() + "…"
