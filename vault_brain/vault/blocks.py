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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Heading:
    start: int  # offset of the heading's line in the body
    level: int  # 1-6
    text: str  # without the '#'s, the optional closing '#'s and the spaces around


@dataclass(frozen=True)
class Blocks:
    fenced: tuple[tuple[int, int], ...]  # (start, end) offsets of fenced code, fences included
    headings: tuple[Heading, ...]  # ATX headings outside fenced code, in order


def scan(body: str) -> Blocks:
    """Fenced code blocks and headings of a body. An unclosed fence runs to the end of the
    text, as in CommonMark; ```x``` on one line is an inline span, not a fence."""
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
    for start, _, _, end in code_spans(text):
        parts += [text[pos:start], _blank(text[start:end])]
        pos = end
    return "".join(parts) + text[pos:]


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
        if escaped(text, start):
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


def escaped(text: str, index: int) -> bool:
    """True when the character at index is preceded by an odd number of backslashes."""
    count = 0
    i = index - 1
    while i >= 0 and text[i] == "\\":
        count += 1
        i -= 1
    return count % 2 == 1
