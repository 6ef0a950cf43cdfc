"""Rendering note files: a fresh note, and surgical edits of an existing one.

Updates edit only the frontmatter lines of the keys vault-brain owns (id, title, summary,
updated, tags). Every other key keeps its value, its exact text (comments, quoting, list
style) and its place; the body is kept byte for byte unless the update changes it. The
whole YAML is never round-tripped through a dumper: that would reorder, reformat and drop
comments the person wrote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import yaml

from vault_brain.errors import InvalidInput
from vault_brain.vault.frontmatter import (
    LOAD_ERRORS,
    TooManyValues,
    canonical_key,
    line_ending,
    load_block,
    split_frontmatter,
)

__all__ = ["format_timestamp", "normalize_tags", "render_new_note", "render_update"]

# Where our keys sit relative to each other; `created` is written once, never edited.
_CANONICAL_ORDER = ("id", "title", "summary", "created", "updated", "tags")
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_LINE_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")
_BOM = "\ufeff"


def format_timestamp(now: datetime | str) -> str:
    """ISO 8601 UTC with a Z, to the second: the one timestamp shape vault-brain writes."""
    if isinstance(now, str):
        return now
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_new_note(
    *,
    id: str,
    title: str,
    content: str,
    summary: str | None = None,
    tags: Sequence[str] = (),
    now: datetime | str,
    created: datetime | str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """A new note: our frontmatter, then the content as the body.

    `created` defaults to `now` (an imported conversation has its own); `extra` are keys
    other than ours to write after them, each as one line of YAML (the importer's
    `source` and `imported_chats`).

    Content that opens with its own `---` block (models often write one) gives one merged
    block, never two: its keys stay, with their text and order, and ours (id, title,
    created, updated; summary and tags when given) win where both are set. A block that is
    not valid YAML is refused rather than written as text that looks like frontmatter.
    """
    stamp = format_timestamp(now)
    born = format_timestamp(created) if created is not None else stamp
    extra_lines = _extra_lines(extra)
    own = (
        split_frontmatter(content.removeprefix(_BOM)) if content.startswith(("---", _BOM)) else None
    )
    if own is not None and own.closed:
        return _merged_new_note(own, id, title, summary, tags, stamp, born, extra_lines)
    lines = [
        _key_line("id", id),
        _key_line("title", title),
    ]
    if summary:
        lines.append(_key_line("summary", summary))
    lines.append(f"created: {born}")
    lines.append(f"updated: {stamp}")
    clean_tags = normalize_tags(tags)
    if clean_tags:
        lines.append(_tags_line(clean_tags))
    lines += extra_lines.values()
    head = "---\n" + "".join(line + "\n" for line in lines) + "---\n"
    return _encode(head + _with_final_newline(content, "\n"))


def _merged_new_note(
    own: Any,
    id: str,
    title: str,
    summary: str | None,
    tags: Sequence[str],
    stamp: str,
    born: str,
    extra_lines: dict[str, str],
) -> bytes:
    try:
        _parse_block(own.block)
    except InvalidInput as exc:
        raise InvalidInput(
            "content opens with a frontmatter block that is not valid YAML: fix it, or give "
            "its keys as summary and tags and only the body as content"
        ) from exc
    # `created` of a new note is now, whatever the model wrote.
    block_text = _drop_keys(own.block, {"created"})
    mapping = _parse_block(block_text)
    sets: dict[str, str | None] = {
        "id": _key_line("id", id),
        "title": _key_line("title", title),
        "created": f"created: {born}",
        "updated": f"updated: {stamp}",
    }
    if summary:
        sets["summary"] = _key_line("summary", summary)
    clean_tags = normalize_tags(tags)
    if clean_tags:
        sets["tags"] = _tags_line(clean_tags)
    block = block_text
    if block and not block.endswith(("\n", "\r")):
        block += "\n"
    new_block = _edit_block(block, sets, "\n", extra_lines)
    # `created` is ours but never edited later, so the general check does not know it.
    theirs = {k: v for k, v in mapping.items() if str(k).strip().lower() != "created"}
    _check_edit(theirs, new_block, {k: v for k, v in sets.items() if k != "created"}, extra_lines)
    body = _line_endings(own.body, "\n")
    return _encode("---\n" + new_block + "---\n" + _with_final_newline(body, "\n"))


def _drop_keys(block: str, names: set[str]) -> str:
    """The block without the top-level entries whose key (any case) is one of `names`."""
    node = yaml.compose(block, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return block
    cuts = [
        (_line_start(block, k.start_mark.index), _entry_end(block, v))
        for k, v in node.value
        if isinstance(k, yaml.ScalarNode) and str(k.value).strip().lower() in names
    ]
    for start, end in reversed(cuts):
        block = block[:start] + block[end:]
    return block


def render_update(
    raw: bytes,
    *,
    content: str | None = None,
    append: str | None = None,
    summary: str | None = None,
    tags: Sequence[str] | None = None,
    title: str | None = None,
    id: str | None = None,
    now: datetime | str,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """The file's bytes with only the requested changes applied; `updated` always moves.

    `extra` sets keys other than ours, each to one line of YAML, where the key stands (or
    at the end of the block): the importer's record of the messages a note holds.

    `id` is written only when the note has none and the write needs frontmatter anyway
    (a title, summary or tags); a content change to a note without frontmatter adds none.
    An empty `summary` or `tags` removes the key. Malformed frontmatter raises
    InvalidInput: refusing is better than rewriting a block we cannot read.
    """
    if content is not None and append is not None:
        raise InvalidInput("give either content (replace) or append, not both")
    text = _decode(raw)
    bom = _BOM if text.startswith(_BOM) else ""
    text = text[len(bom) :]
    nl = line_ending(text)
    parts = split_frontmatter(text)
    if parts is not None and not parts.closed:
        parts = None  # an opening '---' that never closes is text (a rule), not a block

    sets: dict[str, str | None] = {"updated": f"updated: {format_timestamp(now)}"}
    if title is not None:
        if not title.strip():
            raise InvalidInput("title must not be empty")
        sets["title"] = _key_line("title", title)
    if summary is not None:
        sets["summary"] = _key_line("summary", summary) if summary else None
    if tags is not None:
        clean = normalize_tags(tags)
        sets["tags"] = _tags_line(clean) if clean else None

    extra_lines = _extra_lines(extra)
    if parts is None:
        body = text
        if title is None and summary is None and tags is None and not extra_lines:
            # A hand-written note without frontmatter stays without it: a content change
            # needs none (its id is derived from its path, its time is the file's mtime).
            return _encode(bom + _new_body(body, content, append, nl))
        if id:
            sets["id"] = _key_line("id", id)
        lines = [sets[k] for k in _CANONICAL_ORDER if sets.get(k)] + list(extra_lines.values())
        head = "---" + nl + "".join(line + nl for line in lines) + "---" + nl
        return _encode(bom + head + _new_body(body, content, append, nl))

    opening, block, closing, body = parts.opening, parts.block, parts.closing, parts.body
    mapping = _parse_block(block)
    if id and not any(canonical_key(k) == "id" for k in mapping):
        sets["id"] = _key_line("id", id)
    new_block = _edit_block(block, sets, nl, extra_lines)
    _check_edit(mapping, new_block, sets, extra_lines)
    if (content is not None or append is not None) and not closing.endswith(("\n", "\r")):
        closing += nl
    return _encode(bom + opening + new_block + closing + _new_body(body, content, append, nl))


def normalize_tags(tags: Sequence[str]) -> list[str]:
    """Tags as Obsidian stores them: no '#', no surrounding space, no empties, no repeats."""
    if isinstance(tags, str):
        tags = [tags]
    out: list[str] = []
    for tag in tags:
        clean = str(tag).strip().lstrip("#").strip()
        if clean and clean not in out:
            out.append(clean)
    return out


# --- frontmatter text -------------------------------------------------------------------


def _extra_lines(extra: Mapping[str, Any] | None) -> dict[str, str]:
    """{key: its line} for keys other than ours; refuses one of ours (they have rules)."""
    out = {}
    for name, value in (extra or {}).items():
        if canonical_key(name) is not None or name.strip().lower() == "created":
            raise InvalidInput(f"{name!r} is set by its own argument, not as an extra key")
        out[name.strip().casefold()] = f"{name.strip()}: {_dump(value, flow=True)}"
    return out


def _key_line(key: str, value: str) -> str:
    return f"{key}: {_scalar(str(value))}"


def _tags_line(tags: list[str]) -> str:
    return f"tags: {_dump(tags, flow=True)}"


def _scalar(value: str) -> str:
    return _dump(value, flow=False)


def _dump(value: Any, *, flow: bool) -> str:
    """One-line YAML for a string or a list of strings that loads back to exactly it.

    Plain or single-quoted style when that stays on one line; double-quoted (with escapes)
    when the value holds a line break, which the other styles would fold.
    """
    kwargs = {"allow_unicode": True, "width": math.inf, "default_flow_style": flow}
    out = yaml.safe_dump(value, **kwargs)
    out = out.removesuffix("\n...\n").removesuffix("\n")
    if any(ch in out for ch in _LINE_BREAKS):
        out = yaml.safe_dump(value, default_style='"', **kwargs)
        out = out.removesuffix("\n...\n").removesuffix("\n")
    return out


def _parse_block(block: str) -> dict[str, Any]:
    try:
        data = load_block(block)
    except TooManyValues as exc:
        raise InvalidInput(
            f"the note's frontmatter is not read ({exc}); edit it by hand first"
        ) from exc
    except LOAD_ERRORS as exc:
        raise InvalidInput("the note's frontmatter is not valid YAML; fix it first") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInput("the note's frontmatter is not a key: value mapping; fix it first")
    return data


@dataclass(frozen=True)
class _Segment:
    text: str
    key: str | None  # our key this entry sets ("tags" for `Tags:`), "" for other keys,
    # None for the text between entries (comments, blank lines)
    spelling: str = ""  # the key as the person wrote it, when it is a plain word
    name: str = ""  # any text key, casefolded (for the extra keys an edit sets)


def _segments(block: str) -> tuple[list[_Segment], int]:
    """The block cut into top-level entries and the text between them; and the key indent."""
    try:
        node = yaml.compose(block, Loader=yaml.SafeLoader)
    except LOAD_ERRORS as exc:
        raise InvalidInput("the note's frontmatter is not valid YAML; fix it first") from exc
    if node is None:
        return [_Segment(block, None)] if block else [], 0
    if not isinstance(node, yaml.MappingNode) or node.flow_style:
        raise InvalidInput("the note's frontmatter is not a block mapping; edit it by hand")
    segments: list[_Segment] = []
    pos = 0
    indent = node.value[0][0].start_mark.column if node.value else 0
    for key_node, value_node in node.value:
        start = _line_start(block, key_node.start_mark.index)
        end = _entry_end(block, value_node)
        if start < pos:
            raise InvalidInput("the note's frontmatter puts two keys on one line; edit it by hand")
        if start > pos:
            segments.append(_Segment(block[pos:start], None))
        plain = isinstance(key_node, yaml.ScalarNode) and key_node.style is None
        ours = canonical_key(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None
        entry, tail = _trim_trailing(block[start:end], value_node)
        name = (
            str(key_node.value).strip().casefold() if isinstance(key_node, yaml.ScalarNode) else ""
        )
        segments.append(_Segment(entry, ours or "", key_node.value if plain and ours else "", name))
        if tail:
            segments.append(_Segment(tail, None))
        pos = end
    if pos < len(block):
        segments.append(_Segment(block[pos:], None))
    return segments, indent


def _line_start(block: str, index: int) -> int:
    return max(block.rfind("\n", 0, index), block.rfind("\r", 0, index)) + 1


def _entry_end(block: str, value_node: yaml.Node) -> int:
    mark = value_node.end_mark
    if mark.column == 0 and mark.index > 0:
        return mark.index
    line = _LINES.match(block, _line_start(block, mark.index))
    return line.end() if line else len(block)


def _trim_trailing(entry: str, value_node: yaml.Node) -> tuple[str, str]:
    """Blank and comment lines the parser counted into a list belong between entries."""
    lines = _LINES.findall(entry)
    block_scalar = isinstance(value_node, yaml.ScalarNode) and value_node.style in ("|", ">")
    cut = len(lines)
    while cut > 1:
        stripped = lines[cut - 1].strip()
        if stripped == "" or (stripped.startswith("#") and not block_scalar):
            cut -= 1
        else:
            break
    return "".join(lines[:cut]), "".join(lines[cut:])


def _edit_block(
    block: str, sets: dict[str, str | None], nl: str, extra: Mapping[str, str] | None = None
) -> str:
    """Replace, drop or insert our keys' lines (and `extra` keys' lines); everything else
    stays as written."""
    segments, indent = _segments(block)
    prefix = " " * indent
    if segments and not segments[-1].text.endswith(("\n", "\r")):
        segments[-1] = replace(segments[-1], text=segments[-1].text + nl)
    for key in _CANONICAL_ORDER:
        if key not in sets:
            continue
        line = sets[key]
        hits = [i for i, seg in enumerate(segments) if seg.key == key]
        if hits:
            for i in reversed(hits[1:]):
                del segments[i]
            if line is None:
                del segments[hits[0]]
            else:
                spelling = segments[hits[0]].spelling or key
                segments[hits[0]] = _Segment(prefix + spelling + line[len(key) :] + nl, key)
        elif line is not None:
            segments.insert(_insert_at(segments, key), _Segment(prefix + line + nl, key))
    for name, line in (extra or {}).items():
        hits = [i for i, seg in enumerate(segments) if seg.key == "" and seg.name == name]
        for i in reversed(hits[1:]):
            del segments[i]
        new = _Segment(prefix + line + nl, "", "", name)
        if hits:
            segments[hits[0]] = new
        else:
            segments.append(new)
    return "".join(seg.text for seg in segments)


def _insert_at(segments: list[_Segment], key: str) -> int:
    """After the nearest of our keys that comes before it, else before the nearest after it,
    else at the end of the block."""
    order = _CANONICAL_ORDER.index(key)
    for earlier in reversed(_CANONICAL_ORDER[:order]):
        for i in range(len(segments) - 1, -1, -1):
            if segments[i].key == earlier:
                return i + 1
    for later in _CANONICAL_ORDER[order + 1 :]:
        for i, seg in enumerate(segments):
            if seg.key == later:
                return i
    return len(segments)


def _check_edit(
    old: dict[str, Any],
    new_block: str,
    sets: dict[str, str | None],
    extra: Mapping[str, str] | None = None,
) -> None:
    """Refuse an edit that would change a key we do not own (anchors, odd indentation)."""
    try:
        new = load_block(new_block)
    except LOAD_ERRORS as exc:
        raise InvalidInput("cannot edit this frontmatter safely; edit it by hand") from exc
    new = new or {}
    if not isinstance(new, dict):
        raise InvalidInput("cannot edit this frontmatter safely; edit it by hand")
    extra = extra or {}
    for key, value in old.items():
        if canonical_key(key) in sets or str(key).strip().casefold() in extra:
            continue
        if key not in new or not _same(new[key], value):
            raise InvalidInput("cannot edit this frontmatter without changing other keys")
    present = {canonical_key(k) for k in new}
    for key, line in sets.items():
        if (line is None) == (key in present):
            raise InvalidInput("cannot edit this frontmatter safely; edit it by hand")
    written = {str(k).strip().casefold() for k in new}
    if any(name not in written for name in extra):
        raise InvalidInput("cannot edit this frontmatter safely; edit it by hand")


def _same(a: Any, b: Any) -> bool:
    return a == b or repr(a) == repr(b)


# --- body -------------------------------------------------------------------------------


def _new_body(body: str, content: str | None, append: str | None, nl: str) -> str:
    if content is not None:
        return _with_final_newline(_line_endings(content, nl), nl)
    if append is not None:
        addition = _line_endings(append, nl)
        addition = re.sub(r"\A(?:[ \t]*(?:\r\n|\n|\r))+", "", addition)
        addition = _with_final_newline(addition, nl)
        kept = _without_trailing_blank_lines(body)
        if not kept.strip():
            return addition
        return kept + nl + nl + addition
    return body


def _without_trailing_blank_lines(body: str) -> str:
    """The body without the line breaks (and blank lines) at its end; spaces that end its
    last line stay. One pass: the regex for this was quadratic on "\\n " * 50_000."""
    content = body.rstrip(" \t\r\n")
    tail = body[len(content) :]
    line_end = min((i for i in (tail.find("\r"), tail.find("\n")) if i >= 0), default=len(tail))
    return content + tail[:line_end]


def _line_endings(text: str, nl: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if nl == "\n" else text.replace("\n", nl)


def _with_final_newline(text: str, nl: str) -> str:
    if not text:
        return ""
    return text.rstrip("\r\n") + nl


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("the note is not valid UTF-8; vault-brain will not rewrite it") from exc


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("text holds characters that cannot be written as UTF-8") from exc
