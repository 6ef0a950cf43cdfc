"""Parsing takes time in proportion to the text, whatever a person (or an attacker) types.

A complexity check, not a benchmark: long runs of each markup character, and nesting,
must parse in far less CPU time than a quadratic regex needs (60k spaces took 143 s, 40k
'[' 78 s), counted in passes of a bare loop over the text on this machine
(tests/complexity.py), so neither a slow nor a busy machine fails it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.complexity import assert_linear
from vault_brain.index.chunking import chunk_note
from vault_brain.search.snippets import make_snippet, plain_text
from vault_brain.summarize.clean import clean_summary
from vault_brain.text.secrets import find_secret
from vault_brain.vault.note import parse_note
from vault_brain.vault.render import render_update

SIZE = 100_000

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


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Lazy loads (the chunker's tokenizer, compiled patterns) are not a text's cost."""
    for call in CALLS.values():
        call("# Warm\n\nup [[a]] `b` **c**\n")


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=hostile_text())
def test_long_runs_of_markup_parse_in_linear_time(name: str, text: str) -> None:
    assert_linear(name, CALLS[name], text)


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_every_markup_run_alone_parses_in_linear_time(fragment: str) -> None:
    """The runs hypothesis may not happen to draw: each fragment, 100 KB of it, + 'x'."""
    text = fragment * (SIZE // len(fragment)) + "x"
    for name, call in CALLS.items():
        assert_linear(f"{name} on {fragment!r} * n", call, text)


@pytest.mark.slow
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
    for name, call in CALLS.items():
        assert_linear(name, call, text)
