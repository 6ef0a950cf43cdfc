"""The block structure of a Markdown body, scanned once: which lines are fenced code, where
the ATX headings outside code are, and where inline code spans are.

Links and tags (never inside code), the title (the first `# ` heading outside code), the
lead (prose only) and the chunker's sections (headings outside code) all read this one
scan, so they agree on what is code and what is a heading, and a body is scanned once
however many of them look at it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from itertools import starmap
from typing import Any

from vault_brain.native import load

# The same scan, masking and spans in C (vault_brain/native/_mdscan.c), built by
# `pip install`; without it, or with VAULT_BRAIN_NATIVE=0, the Python below (the reference
# the tests compare it with) runs. A cpp-docs pass's scan and masking: 1.36 -> 0.20 CPU-s
# (docs/benchmarks.md, "The parse workers' per-character loops in C").
_native = load("_mdscan")
_records = load("_records")

# A fence opens a code block: ``` or ~~~ (3 or more). Any indentation and blockquote
# markers are accepted, so fences nested in list items and callouts count as code too.
# Possessive runs (*+): nothing after them can use what they give back, and without them a
# line of 60k spaces took minutes (each split of the run between the two [ \t]* was tried).
_FENCE_OPEN = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(?P<fence>`{3,}+|~{3,}+)(?P<info>.*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*+(?:>[ \t]?+)*+[ \t]*+(?P<fence>`{3,}+|~{3,}+)[ \t]*+$")
# A line that may matter to the scan: a fence (after indentation or '>') or an ATX heading.
# Matched against "\n" + body: the literal "\n" lets the regex engine skip ahead fast.
_CANDIDATE = re.compile(r"\n(?=[ \t>]*+(?:`{3}|~{3})| {0,3}#)")
_ATX = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE_AT = re.compile(r"\n(?=[ \t]*+\n)")  # a literal first: the engine skips ahead
_SPAN = re.Match.span
_START = re.Match.start


@dataclass(frozen=True)
class Heading:
    start: int  # offset of the heading's line in the body
    level: int  # 1-6
    text: str  # without the '#'s, the optional closing '#'s and the spaces around


def many(cls: type) -> Callable[[Iterable[tuple]], list]:
    """[cls(*row) for row in rows] for a frozen dataclass, in C where `cls` is one whose
    __init__ only sets its fields (vault_brain/native/_records.c: the same objects, without
    a Python frame per instance; 64k Headings of cpp-docs: ~0.17 CPU-s a pass)."""
    names = tuple(f.name for f in fields(cls))
    params: Any = getattr(cls, "__dataclass_params__", None)
    plain = (
        _records is not None
        and params is not None
        and params.frozen
        and params.init
        and cls.__new__ is object.__new__
        and not hasattr(cls, "__post_init__")
        and not hasattr(cls, "__slots__")
        and all(f.init for f in fields(cls))
        and len(names) == len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    )
    if not plain:
        return lambda rows: list(starmap(cls, rows))
    return lambda rows: _records.instances(cls, names, rows)  # type: ignore[union-attr]


_headings = many(Heading)


@dataclass(frozen=True)
class Blocks:
    fenced: tuple[tuple[int, int], ...]  # (start, end) offsets of fenced code, fences included
    headings: tuple[Heading, ...]  # ATX headings outside fenced code, in order


def scan(body: str) -> Blocks:
    """Fenced code blocks and headings of a body. An unclosed fence runs to the end of the
    text, as in CommonMark; ```x``` on one line is an inline span, not a fence."""
    if _native is not None:
        fenced, headings = _native.scan(body)
        return Blocks(tuple(fenced), tuple(_headings(headings)))
    return scan_py(body)


def scan_py(body: str) -> Blocks:
    """scan() in Python: the fallback, and the reference of the C one."""
    fenced: list[tuple[int, int]] = []
    headings: list[Heading] = []
    fence_char, fence_len, fence_start = "", 0, 0
    for m in _CANDIDATE.finditer("\n" + body):
        start = m.start()  # the line's offset in body
        end = body.find("\n", start)
        line = body[start : end if end >= 0 else len(body)]
        if fence_char:
            close = _FENCE_CLOSE.match(line)
            if close and close.group("fence")[0] == fence_char:
                if len(close.group("fence")) >= fence_len:
                    fence_char = ""
                    fenced.append((fence_start, len(body) if end < 0 else end + 1))
            continue
        opened = _FENCE_OPEN.match(line)
        if opened is not None:
            fence = opened.group("fence")
            if not (fence[0] == "`" and "`" in opened.group("info")):
                fence_char, fence_len, fence_start = fence[0], len(fence), start
                continue
        atx = _ATX.match(line)
        if atx is not None:
            headings.append(Heading(start, len(atx.group(1)), heading_text(line[atx.end() :])))
    if fence_char:
        fenced.append((fence_start, len(body)))
    return Blocks(tuple(fenced), tuple(headings))


def heading_text(rest: str) -> str:
    """An ATX heading's text after the '#'s: without the optional closing '#'s (which must
    follow a space, or be all there is) and the spaces around, in one pass (the regex
    `(?:^|[ \\t]+)#+$` was quadratic on long space runs)."""
    text = rest.strip()
    head = text.rstrip("#")
    if head != text and (not head or head[-1] in " \t"):
        return head.strip()
    return text


def fenced_lines(lines: list[str], blocks: Blocks | None = None) -> list[bool]:
    """Per line of "\\n".join(lines): True when it belongs to a fenced code block."""
    if blocks is None:
        blocks = scan("\n".join(lines))
    flags = [False] * len(lines)
    if not blocks.fenced:
        return flags
    offset = 0
    spans = iter(blocks.fenced)
    span = next(spans, None)
    for i, line in enumerate(lines):
        while span is not None and offset >= span[1]:
            span = next(spans, None)
        if span is None:
            break
        flags[i] = span[0] <= offset
        offset += len(line) + 1
    return flags


def mask_code(text: str, blocks: Blocks | None = None) -> str:
    """Blank out fenced code blocks and inline code spans, keeping length and newlines."""
    if blocks is None:
        blocks = scan(text)
    if _native is not None:
        return _native.mask_code(text, blocks.fenced)
    return mask_code_py(text, blocks)


def mask_code_py(text: str, blocks: Blocks) -> str:
    """mask_code() in Python: the fallback, and the reference of the C one."""
    if blocks.fenced:
        parts, pos = [], 0
        for start, end in blocks.fenced:
            parts += [text[pos:start], _blank(text[start:end])]
            pos = end
        text = "".join(parts) + text[pos:]
    if "`" not in text:
        return text
    return _mask_code_spans(text)


def _blank(text: str) -> str:
    return "\n".join(" " * len(line) for line in text.split("\n"))


def _mask_code_spans(text: str) -> str:
    """Blank out inline code spans (see code_spans), keeping length and newlines."""
    parts, pos = [], 0
    for start, _, _, end in code_spans_py(text):
        parts += [text[pos:start], _blank(text[start:end])]
        pos = end
    return "".join(parts) + text[pos:]


def code_spans(text: str) -> list[tuple[int, int, int, int]]:
    """CommonMark code spans: a run of n backticks closes at the next run of exactly n, before
    a blank line; "\\`" is a literal backtick. (start, content start, content end, end) each.

    Linear: every run and blank line is found once and each run's closer (the next run of
    its width) is found in one backward pass, so thousands of unmatched backticks cost no
    more than reading them.
    """
    if "`" not in text:
        return []
    if _native is not None:
        return _native.code_spans(text)
    return code_spans_py(text)


def code_spans_py(text: str) -> list[tuple[int, int, int, int]]:
    """code_spans() in Python: the fallback, and the reference of the C one."""
    if "`" not in text:
        return []
    runs = list(map(_SPAN, _BACKTICKS.finditer(text)))
    count = len(runs)
    after = [count] * count  # the next run of the same width, `count` when there is none
    last: dict[int, int] = {}
    for i in range(count - 1, -1, -1):
        start, end = runs[i]
        after[i] = last.get(end - start, count)
        last[end - start] = i
    blanks = list(map(_START, _BLANK_LINE_AT.finditer(text)))
    by_width: dict[int, list[int]] | None = None  # for runs cut by an escape (rare)
    spans = []
    pos = 0
    i = 0
    while i < count:
        start, end = runs[i]
        if start < pos:
            start = pos
            if start >= end:
                i += 1
                continue
        if start and text[start - 1] == "\\" and escaped(text, start):
            pos = start + 1  # "\\`" is a literal backtick; the rest of the run may still open
            continue
        if start == runs[i][0]:
            k = after[i]
        else:  # a run shortened by an escape: the next run of its new width
            if by_width is None:
                by_width = {}
                for n, (s, e) in enumerate(runs):
                    by_width.setdefault(e - s, []).append(n)
            same = by_width.get(end - start, [])
            j = bisect.bisect_right(same, i)
            k = same[j] if j < len(same) else count
        if k == count:
            pos = end  # no matching run: these backticks are literal
            i += 1
            continue
        close_start, close_end = runs[k]
        if blanks:
            b = bisect.bisect_left(blanks, end)
            if b < len(blanks) and close_end > blanks[b]:
                pos = end  # a blank line comes first: these backticks are literal
                i += 1
                continue
        spans.append((start, end, close_start, close_end))
        pos = close_end
        i = k + 1
    return spans


def escaped(text: str, index: int) -> bool:
    """True when the character at index is preceded by an odd number of backslashes."""
    count = 0
    i = index - 1
    while i >= 0 and text[i] == "\\":
        count += 1
        i -= 1
    return count % 2 == 1
