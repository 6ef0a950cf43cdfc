"""How fast a long piece of work goes and when it will end, for the person waiting on it.

The rate is taken over the recent past: not from the start (the first seconds hold a
model's load and cold caches, and a pace that changes midway would lag for minutes), not
from the last step alone (e5 batches are uneven: a batch of long chunks takes three times
one of short ones). The window begins at the first completed step, so warm-up never
counts, and no estimate is given until the samples span MIN_SPAN_SECONDS or MIN_STEPS
steps, whichever comes first.
bench/progress_eta.py measures how well the time left holds on a real vault.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 30.0  # the recent past a rate is taken over
MIN_SPAN_SECONDS = 3.0  # no rate (nor time left) before the samples span this long...
MIN_STEPS = 5  # ... or this many steps after the first


class Meter:
    """Work done of a total over time: the rate over the last WINDOW_SECONDS, the time left
    at that rate, and the average since the start for a closing summary."""

    def __init__(
        self,
        total: int | None = None,
        *,
        done: int = 0,
        window: float = WINDOW_SECONDS,
        min_span: float = MIN_SPAN_SECONDS,
        min_steps: int = MIN_STEPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.done = done
        self.window = window
        self.min_span = min_span
        self.min_steps = min_steps
        self._steps = 0  # steps recorded since the first completed one
        self._clock = clock
        self.started = clock()
        self.first = done  # what was done before this run (a resumed backlog)
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, done: int, total: int | None = None) -> None:
        """Record that `done` units are done now (and the total, when it moved)."""
        now = self._clock()
        if total is not None:
            self.total = total
        self.done = done
        if done <= self.first and not self._samples:
            return  # nothing completed yet: the window starts at the first completed step
        if self._samples:
            self._steps += 1
        self._samples.append((now, done))
        # Keep one sample at least `window` old, so the span covers the whole window.
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self) -> float | None:
        """Units per second over the recent window; None until it spans `min_span` seconds
        or `min_steps` steps."""
        if len(self._samples) < 2:
            return None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        if (t1 - t0 < self.min_span and self._steps < self.min_steps) or d1 <= d0 or t1 <= t0:
            return None
        return (d1 - d0) / (t1 - t0)

    def eta(self) -> float | None:
        """Seconds left at the recent rate; None while there is no rate or no total."""
        rate = self.rate()
        if rate is None or self.total is None:
            return None
        return max(0, self.total - self.done) / rate

    def elapsed(self) -> float:
        return self._clock() - self.started

    def average(self) -> float:
        """Units per second since the start, warm-up included: what a summary reports."""
        return max(0, self.done - self.first) / max(self.elapsed(), 1e-9)


def duration(seconds: float) -> str:
    """16.2 s, 9m12s, 1h05m: short and exact enough to plan by."""
    if seconds < 59.95:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes = round(seconds) // 60
    if minutes < 60:
        return f"{minutes}m{round(seconds) % 60:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def time_left(seconds: float) -> str:
    """ "6m10s left", "5 s left": whole seconds, rounded up (a countdown never says 0 early)."""
    whole = max(1, math.ceil(seconds))
    return f"{whole} s left" if whole < 60 else f"{duration(whole)} left"


def per_second(rate: float, unit: str) -> str:
    """601 files/s, 62 chunks/s, 0.4 chunks/s."""
    return f"{rate:,.0f} {unit}/s" if rate >= 10 else f"{rate:.1f} {unit}/s"
