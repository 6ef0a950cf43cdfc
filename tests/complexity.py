"""Linear or not: a call's CPU time measured against this machine's own pace.

A complexity check, not a benchmark. A parse that is quadratic in its text takes tens of
seconds to minutes on 100 KB (60k spaces took 143 s, 40k '[' 78 s); a linear one costs at
most a couple of hundred passes of a bare Python loop over the same characters (find_secret,
the slowest, ~200; most parsers 1-50). So the bound is a budget counted in such passes, and
the pass is timed here: a slow machine gets a budget as slow as itself. The time counted is
the calling thread's CPU time, which other processes on a busy machine do not add to.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

PASSES = 5_000  # the budget: 25x the slowest linear parser, far below any quadratic one
MIN_CHARS = 100_000  # a shorter text gets this length's budget: fixed costs, not growth


@functools.cache
def seconds_per_char() -> float:
    """CPU time of one bare loop step over a string, here and now (the least of five)."""
    text = "x" * MIN_CHARS
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        for _char in text:
            pass
        best = min(best, time.thread_time() - started)
    return max(best, 1e-9 * MIN_CHARS) / MIN_CHARS


def assert_linear(name: str, call: Callable[[str], object], text: str) -> None:
    """`call(text)` costs no more than PASSES loop passes over the text."""
    started = time.thread_time()
    call(text)
    used = time.thread_time() - started
    passes = used / (seconds_per_char() * max(len(text), MIN_CHARS))
    assert passes < PASSES, (
        f"{name} took {used:.2f} s of CPU on {len(text)} chars: {passes:.0f} passes of a "
        f"loop over them (a linear parse takes a few hundred at most)"
    )
