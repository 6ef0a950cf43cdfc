"""Search replies on a token budget (`memory_search max_tokens`, `search --max-tokens`).

Each surface renders its own reply (compact JSON for MCP, indented JSON or lines for the
CLI) and counts that whole text, so the budget holds for exactly what the reader receives.
The best hits go in whole, in rank order, until the next one would not fit; that one goes in
with its snippet (then its summary) cut down if something of it fits, and the rest are left
out and counted, so a reader knows there was more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vault_brain.errors import InvalidInput
from vault_brain.records import Hit

# render(kept hits, how many were left out) -> the whole reply text
Render = Callable[[list[Hit], int], str]
ELLIPSIS = "…"


def fit_hits(
    hits: Sequence[Hit], render: Render, count: Callable[[str], int], max_tokens: int
) -> tuple[list[Hit], str]:
    """(the hits that fit, the reply text with them): `count(text) <= max_tokens` always.
    Raises InvalidInput when not even a reply without hits fits."""
    total = len(hits)
    text = render([], total)
    if count(text) > max_tokens:
        raise InvalidInput(
            f"max_tokens {max_tokens} is too small: a reply with no results takes "
            f"{count(text)} tokens"
        )
    kept: list[Hit] = []
    for hit in hits:
        left = total - len(kept) - 1
        whole = render([*kept, hit], left)
        if count(whole) <= max_tokens:
            kept.append(hit)
            text = whole
            continue
        cut = _cut_to_fit(hit, kept, left, render, count, max_tokens)
        if cut is not None:
            kept.append(cut[0])
            text = cut[1]
        break
    return kept, text


def _cut_to_fit(
    hit: Hit,
    kept: list[Hit],
    left: int,
    render: Render,
    count: Callable[[str], int],
    max_tokens: int,
) -> tuple[Hit, str] | None:
    """The hit with its snippet shortened (and, if need be, no snippet and its summary
    shortened) so the reply fits; None when not even its id and title fit."""
    no_snippet = hit._replace(snippet="")
    if count(render([*kept, no_snippet], left)) <= max_tokens:
        return _longest(hit, "snippet", kept, left, render, count, max_tokens)
    return _longest(no_snippet, "summary", kept, left, render, count, max_tokens)


def _longest(
    hit: Hit,
    field: str,
    kept: list[Hit],
    left: int,
    render: Render,
    count: Callable[[str], int],
    max_tokens: int,
) -> tuple[Hit, str] | None:
    """The longest prefix of `field` that fits (binary search over characters; every
    answer is checked, so the reply never exceeds the budget)."""
    value: str = getattr(hit, field)

    def attempt(n: int) -> tuple[Hit, str]:
        shown = "" if n == 0 else value[:n].rstrip() + ELLIPSIS
        candidate = hit._replace(**{field: shown})
        return candidate, render([*kept, candidate], left)

    best = attempt(0)
    if count(best[1]) > max_tokens:
        return None
    lo, hi = 1, len(value) - 1  # the whole value did not fit
    while lo <= hi:
        mid = (lo + hi) // 2
        found = attempt(mid)
        if count(found[1]) <= max_tokens:
            best, lo = found, mid + 1
        else:
            hi = mid - 1
    return best
