"""What a one-shot command (`vault-brain index`) shows while it works, phase by phase.

On a terminal each phase is a bar: what it does, how many of how many, the rate in its
own unit and the time left (vault_brain/meter.py); a finished phase leaves one summary
line on screen. Where stderr is not a terminal (CI, a pipe, a log file) there are no bars:
a line with the counts every PLAIN_EVERY_SECONDS, and the same summary line per phase.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from vault_brain.meter import Meter, duration, per_second, time_left

PLAIN_EVERY_SECONDS = 10.0  # without a terminal: a progress line this often per phase


class Phases:
    """The display of one command's phases; use it as a context manager."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        every: float = PLAIN_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        stopping: threading.Event | None = None,
    ) -> None:
        """`stopping`: once set (Ctrl-C), the bars say the work stops after this batch."""
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every
        self.clock = clock
        self.stopping = stopping or threading.Event()
        self._bars: Any = None
        self._lock = threading.Lock()

    def __enter__(self) -> Phases:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn

            self._bars = Progress(
                TextColumn("{task.description:<10}", markup=False),
                BarColumn(bar_width=20),
                _live_column("_counts"),
                _live_column("_pace"),  # redrawn ten times a second: "stopping" shows at once
                console=Console(file=self.stream),
                transient=True,  # finished phases leave their summary line, not a bar
            )
            self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def phase(
        self,
        label: str,
        unit: str,
        total: int | None = None,
        *,
        done: int = 0,
        verb: str | None = None,
    ) -> Phase:
        """A new phase: `label` says what it does, `unit` what it counts (files, chunks),
        `done` what was done before (a resumed backlog), `verb` how its summary begins
        ("parsed"; else "label:")."""
        return Phase(self, label, unit, total, done, verb)

    def say(self, line: str) -> None:
        """A line kept on screen (above the bars on a terminal)."""
        with self._lock:
            if self._bars is not None:
                from rich.text import Text

                self._bars.console.print(Text(line))
            else:
                try:
                    self.stream.write(line + "\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass


class Phase:
    """One phase's bar (or plain lines) and meter."""

    def __init__(
        self,
        phases: Phases,
        label: str,
        unit: str,
        total: int | None,
        done: int,
        verb: str | None = None,
    ) -> None:
        self.phases = phases
        self.label = label
        self.unit = unit
        self.verb = verb or f"{label}:"
        self.meter = Meter(total, done=done, clock=phases.clock)
        self._last_line = self.meter.started
        self._task = None
        bars = phases._bars
        if bars is not None:
            self._task = bars.add_task(label, total=total, completed=done, phase=self)

    def update(self, done: int, total: int | None = None) -> None:
        self.meter.update(done, total)
        bars = self.phases._bars
        if bars is not None and self._task is not None:
            bars.update(self._task, completed=done, total=self.meter.total)
        elif not self.phases.tty:
            now = self.phases.clock()
            if now - self._last_line >= self.phases.every:
                self._last_line = now
                self.phases.say(f"{self.label}: {self._plain_counts()} ({self._pace()})")

    def finish(self, summary: str | None = None, *, more: str = "") -> None:
        """End the phase: its bar gives way to one summary line that stays (`summary`, else
        the phase's own with `more` after it)."""
        self._drop()
        self.phases.say(summary or self.summary() + more)

    def summary(self) -> str:
        """ "e5 vectors: 34,252 chunks in 9m12s (62 chunks/s)": this run's work; "parsed
        4,210 of 9,746 files …" when it ended short of its total."""
        m = self.meter
        done = max(0, m.done - m.first)
        of = ""
        if m.total is not None and m.done < m.total:
            of = f" of {m.total - m.first:,}"
        return (
            f"{self.verb} {done:,}{of} {self.unit} in {duration(m.elapsed())} "
            f"({per_second(m.average(), self.unit)})"
        )

    def drop(self) -> None:
        """End the phase without a line (it had nothing to do)."""
        self._drop()

    def _drop(self) -> None:
        bars = self.phases._bars
        if bars is not None and self._task is not None:
            bars.remove_task(self._task)
            self._task = None

    def _counts(self) -> str:
        m = self.meter
        if m.total is None:
            return f"{m.done:,} {self.unit}" if m.done else "counting"
        return f"{m.done:,}/{m.total:,} {self.unit}"

    def _plain_counts(self) -> str:
        m = self.meter
        return self._counts() if m.total is None else f"{m.done:,} of {m.total:,} {self.unit}"

    def _pace(self) -> str:
        m = self.meter
        if self.phases.stopping.is_set():
            return "stopping after this batch (Ctrl-C again to quit at once)"
        rate = m.rate()
        if rate is None:
            return "measuring the pace" if m.total else duration(m.elapsed())
        eta = m.eta()
        return per_second(rate, self.unit) + (f", {time_left(eta)}" if eta is not None else "")


def _live_column(method: str) -> Any:
    """A bar column that asks the phase for its text at each redraw."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Live(ProgressColumn):
        def render(self, task: Any) -> Text:
            phase = task.fields.get("phase")
            return Text(getattr(phase, method)() if phase is not None else "")

    return Live()
