"""The rate and the time left a person is shown (meter.py), the plain lines of `index`
without a terminal (progress.py) and the e5 backlog's log lines (backlog.py), on a clock
the test moves: what they say depends on the time, so the time is given, not waited for."""

from __future__ import annotations

import io
import json

import pytest

from vault_brain import log
from vault_brain.backlog import Backlog, BacklogProgress
from vault_brain.meter import Meter, duration, per_second, time_left
from vault_brain.progress import Phases


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_slow_start_does_not_count_in_the_rate():
    clock = Clock()
    meter = Meter(1000, clock=clock)
    clock.now = 20.0  # the model loads for 20 s, then 64 chunks every 2 s
    meter.update(64)
    for _ in range(10):
        clock.now += 2.0
        meter.update(meter.done + 64)
    assert meter.rate() == pytest.approx(32.0)
    assert meter.eta() == pytest.approx((1000 - 704) / 32.0)
    assert meter.average() == pytest.approx(704 / 40.0)  # the summary's figure includes it


def test_the_rate_follows_a_change_of_pace_within_the_window():
    clock = Clock()
    meter = Meter(10_000, window=30.0, clock=clock)
    for _ in range(60):  # 60 s at 10 units/s
        clock.now += 1.0
        meter.update(meter.done + 10)
    for _ in range(40):  # then the machine gets busy: 5 units/s
        clock.now += 1.0
        meter.update(meter.done + 5)
    assert meter.rate() == pytest.approx(5.0, rel=0.05)


def test_uneven_batches_give_a_steady_rate():
    clock = Clock()
    meter = Meter(100_000, clock=clock)
    rates = []
    for i in range(60):  # 64 chunks in 1 s, then 64 in 3 s (short and long chunks)
        clock.now += 1.0 if i % 2 else 3.0
        meter.update(meter.done + 64)
        if clock.now > 40:
            rates.append(meter.rate())
    assert min(rates) >= 32.0 * 0.85 and max(rates) <= 32.0 * 1.15, rates


def test_no_rate_before_a_few_seconds_or_steps():
    clock = Clock()
    meter = Meter(1000, clock=clock)
    assert meter.rate() is None and meter.eta() is None
    clock.now = 1.0
    meter.update(10)
    clock.now = 1.5
    meter.update(20)
    assert meter.rate() is None  # 0.5 s and one step: not yet
    clock.now = 4.5
    meter.update(30)
    assert meter.rate() == pytest.approx(20 / 3.5)


def test_figures_read_as_a_person_writes_them():
    assert duration(0.84) == "0.8 s"
    assert duration(16.2) == "16 s"
    assert duration(552) == "9m12s"
    assert duration(3900) == "1h05m"
    assert time_left(0.2) == "1 s left"
    assert time_left(370) == "6m10s left"
    assert per_second(601.4, "files") == "601 files/s"
    assert per_second(6.53, "chunks") == "6.5 chunks/s"


def test_without_a_terminal_a_phase_prints_counts_every_ten_seconds_and_a_summary():
    clock = Clock()
    out = io.StringIO()
    with Phases(out, tty=False, clock=clock) as phases:
        phase = phases.phase("parse", "files", 1000, verb="parsed")
        for step in range(1, 26):  # 40 files a second for 25 s
            clock.now = float(step)
            phase.update(step * 40)
        phase.finish(more=": 1,000 added")
    lines = out.getvalue().splitlines()
    assert lines == [
        "parse: 400 of 1,000 files (40 files/s, 15 s left)",
        "parse: 800 of 1,000 files (40 files/s, 5 s left)",
        "parsed 1,000 files in 25 s (40 files/s): 1,000 added",
    ]


@pytest.fixture
def logged(capsys, monkeypatch):
    """The JSON log lines written meanwhile."""
    monkeypatch.setattr(log, "_human", False)
    monkeypatch.setattr(log, "_quiet", False)

    def read() -> list[dict]:
        return [json.loads(line) for line in capsys.readouterr().err.splitlines()]

    return read


def test_a_backlog_is_told_when_it_starts_when_its_pace_is_known_every_30_s_and_at_its_end(
    logged,
):
    clock = Clock()
    counts = {"done": 0, "total": 70 * 32 + 16}
    published: list[BacklogProgress | None] = []
    backlog = Backlog(
        "strong", lambda: (counts["done"], counts["total"]), published.append, clock=clock
    )
    backlog.begin("e5")
    for _ in range(70):  # 32 chunks a second
        clock.now += 1.0
        counts["done"] += 32
        backlog.worked(32, dry=False)
    clock.now += 1.0
    counts["done"] += 16
    backlog.worked(16, dry=True)
    events = logged()
    names = [e["event"] for e in events]
    assert names == [
        "strong_backlog_started",
        "strong_progress",  # as soon as the pace is measured (3 s)
        "strong_progress",  # then every 30 s
        "strong_progress",
        "strong_backlog_done",
    ]
    assert (events[0]["done"], events[0]["total"], events[0]["pending"]) == (0, 2256, 2256)
    assert events[1]["chunks_per_s"] == pytest.approx(32.0)
    assert events[2]["eta_s"] == pytest.approx((2256 - events[2]["done"]) / 32.0, abs=1)
    assert events[-1]["done"] == 2256 and events[-1]["written"] == 2256
    states = [p for p in published if p is not None]
    assert states and states[-1].rate == pytest.approx(32.0)
    assert published[-1] is None  # done: status shows no pace any more


def test_a_few_new_chunks_are_no_backlog(logged):
    published: list[BacklogProgress | None] = []
    backlog = Backlog("strong", lambda: (500, 520), published.append)
    backlog.begin("e5")
    backlog.worked(20, dry=True)
    assert logged() == [] and published == []
