"""Parsing takes time in proportion to the text, whatever a person (or an attacker) types.

A complexity check, not a benchmark: long runs of each markup character, and nesting,
must parse in a time far below what a quadratic regex needs (60k spaces took 143 s, 40k
'[' 78 s). The bound is generous on purpose: 2 s for 100 KB on a busy machine, where a
linear pass takes a few tens of milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vault_brain.index.chunking import chunk_note
from vault_brain.search.snippets import make_snippet, plain_text
from vault_brain.summarize.clean import clean_summary
from vault_brain.text.secrets import find_secret
from vault_brain.vault.note import parse_note
from vault_brain.vault.render import render_update

SIZE = 100_000
BOUND_SECONDS = 2.0

CHARS = list(" \t[]()*_`~#>-|!<=%^\\\n:.\"'{}$&+@") + ["\r\n", "\r", "\u200b", "x", "é", "漢"]
FRAGMENTS = CHARS + [
    "[[", "]]", "![", "![[", "[^", "[!", "](", "[a](", "[a]", "**a ", "*a ", "_a ", "~~a ",
    "==a ", "__a ", "<a", "<http:", "<a href=", "`a", "``a`", "<!--", "-->", "%%", "$$",
    "# ", "## ", "- ", "* ", "1. ", "> ", "> > ", "a ^", " \n", "\n\n", "```", "~~~", "\\`",
    "---\n", "| a ", "|-", "#tag ", "[[a|", "[[a#", "<think>", "</think>", "Reasoning: ",
    "Summary: ", "password=", "bearer ", "sk-", "eyJ", "-----BEGIN ", "http://x.y/(",
]  # fmt: skip

CALLS: dict[str, Callable[[str], object]] = {
    "parse_note": lambda t: parse_note("Note.md", t.encode("utf-8")),
    "chunk_note": lambda t: chunk_note("Note", t),
    "plain_text": plain_text,
    "make_snippet": lambda t: make_snippet(t, ["needle"]),
    "clean_summary": lambda t: clean_summary(t, 300),
    "render_update": lambda t: render_update(t.encode("utf-8"), append="More.", now="2026"),
    "find_secret": find_secret,
}


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """A few long runs of markup (one fragment repeated), optionally around ordinary text."""
    runs = draw(
        st.lists(
            st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, SIZE)), min_size=1, max_size=3
        )
    )
    text = "".join(fragment * count for fragment, count in runs)[:SIZE]
    return draw(st.sampled_from(["", "x", "a b\n"])) + text + draw(st.sampled_from(["", "x"]))


def _timed(call: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    call(text)
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=hostile_text())
def test_long_runs_of_markup_parse_in_linear_time(name: str, text: str) -> None:
    elapsed = _timed(CALLS[name], text)
    assert elapsed < BOUND_SECONDS, f"{name} took {elapsed:.1f} s on {len(text)} chars"


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_every_markup_run_alone_parses_in_linear_time(fragment: str) -> None:
    """The runs hypothesis may not happen to draw: each fragment, 100 KB of it, + 'x'."""
    text = fragment * (SIZE // len(fragment)) + "x"
    for name, call in CALLS.items():
        elapsed = _timed(call, text)
        assert elapsed < BOUND_SECONDS, f"{name} took {elapsed:.1f} s on {fragment!r} * n"


@pytest.mark.parametrize(
    "line",
    [
        lambda depth: "  " * depth + "- item\n",
        lambda depth: "\t" * depth + "1. item\n",
        lambda depth: "> " * depth + "quoted\n",
        lambda depth: "  " * depth + "> - [ ] " + "```\n",
    ],
    ids=["bullets", "numbered-tabs", "quotes", "mixed-with-fences"],
)
def test_deep_nesting_parses_in_linear_time(line: Callable[[int], str]) -> None:
    """2,000 levels (a few MB): linear is seconds at most; the quadratic parser took > 240 s."""
    text = "".join(line(depth) for depth in range(2000))
    bound = BOUND_SECONDS * len(text) / SIZE
    for name, call in CALLS.items():
        elapsed = _timed(call, text)
        assert elapsed < bound, f"{name} took {elapsed:.1f} s on {len(text)} chars"
