"""code_spans against the implementation it replaced (kept here as the reference): the same
spans for any text of backticks, escapes, blank lines and words."""

from __future__ import annotations

import bisect
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault.blocks import code_spans, escaped

_BACKTICKS = re.compile(r"`+")
_BLANK_LINE_AT = re.compile(r"\n(?=[ \t]*+\n)")


def _old_code_spans(text: str) -> list[tuple[int, int, int, int]]:
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


_PIECES = st.sampled_from(
    ["`", "``", "```", "\\", "\\\\", "a", " ", "\n", "\n\n", "\n \t\n", "x y", "é"]
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_the_same_spans_as_the_reference(text: str) -> None:
    assert code_spans(text) == _old_code_spans(text)


def test_escapes_that_shorten_a_run_and_blank_lines_between():
    for text in [
        "\\``a`",
        "\\```a``",
        "`a\n\nb`",
        "``a` b``",
        "\\\\`a`",
        "x\\```` y ```",
        "`` ` ``",
    ]:
        assert code_spans(text) == _old_code_spans(text), text
