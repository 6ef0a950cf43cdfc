"""A long background job told as it goes: the strong tier's e5 vectors, which take minutes
on a big vault (hours on a slow machine), behind `watch` and `serve` or an `index` run.

A JSON log line when a backlog starts, one as soon as its pace is measured and then every
LOG_EVERY_SECONDS while it is worked on (done of total, chunks/s over the recent past, time
left), one when it is done or this process stops working on it; and a record
(`BacklogProgress`) the indexer keeps in the index, so `vault-brain status` in any process
shows the rate and the time left.
A save's few new chunks are no backlog and stay quiet.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from vault_brain import log
from vault_brain.meter import Meter

BACKLOG_MIN_CHUNKS = 64  # a backlog is more chunks than this (a few saves make fewer)
LOG_EVERY_SECONDS = 30.0
PUBLISH_EVERY_SECONDS = 5.0  # how stale the record `status` reads may be
STALE_SECONDS = 120.0  # a record older than this (its writer stalled or died) is not shown


@dataclass(frozen=True)
class BacklogProgress:
    """Where a backlog stands, as its worker last recorded: done of total, the recent rate
    (units/s, None while measuring), the seconds left at that rate, who and when."""

    done: int
    total: int
    rate: float | None
    eta_seconds: float | None
    pid: int
    at: float  # time.time() of the record

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, raw: str | None) -> BacklogProgress | None:
        try:
            record = json.loads(raw) if raw else None
            return cls(**record) if isinstance(record, dict) else None
        except (ValueError, TypeError):
            return None

    def fresh(self, holder_pid: int | None, now: float | None = None) -> bool:
        """Written lately by the process that holds the indexer role now."""
        now = time.time() if now is None else now
        return holder_pid == self.pid and now - self.at < STALE_SECONDS


class Backlog:
    """Follows one tier's backlog from the batches its worker reports."""

    def __init__(
        self,
        name: str,
        coverage: Callable[[], tuple[int, int]],
        publish: Callable[[BacklogProgress | None], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        log_every: float = LOG_EVERY_SECONDS,
        publish_every: float = PUBLISH_EVERY_SECONDS,
    ) -> None:
        self.name = name  # the log events' prefix: strong_backlog_started, ...
        self._coverage = coverage  # (done, total) from the index
        self._publish = publish
        self._clock = clock
        self.log_every = log_every
        self.publish_every = publish_every
        self.meter: Meter | None = None
        self._logged = self._published = 0.0
        self._paced = False  # the first measured pace has been told

    @property
    def active(self) -> bool:
        return self.meter is not None

    def begin(self, model: str | None = None) -> None:
        """Before a round of work: a backlog of more than BACKLOG_MIN_CHUNKS starts being
        told (before the model loads, which takes seconds on a slow machine)."""
        if self.meter is not None:
            return
        done, total = self._coverage()
        if total - done <= BACKLOG_MIN_CHUNKS:
            return
        now = self._clock()
        meter = self.meter = Meter(total, done=done, clock=self._clock)
        self._logged = self._published = now
        self._paced = False
        pending = total - done
        log.event(
            f"{self.name}_backlog_started", model=model, done=done, total=total, pending=pending
        )
        self._record(meter)

    def worked(self, written: int, *, dry: bool) -> None:
        """A round wrote `written` vectors; `dry`: the queue is empty now."""
        meter = self.meter
        if meter is None:
            return
        now = self._clock()
        if written:
            meter.update(meter.done + written)
            paced = not self._paced and meter.rate() is not None
            if paced or now - self._published >= self.publish_every:
                self._published = now
                done, total = self._coverage()  # saves meanwhile move the counts
                meter.total = total
                if done != meter.done:
                    meter.update(done)
                self._record(meter)
            if paced or now - self._logged >= self.log_every:
                self._paced = True
                self._logged = now
                log.event(f"{self.name}_progress", **_figures(meter))
        if dry:
            self._end("done")

    def paused(self) -> None:
        """This process stops working on the backlog (it stops, or hands the role over)."""
        if self.meter is not None:
            self._end("paused")

    def _end(self, how: str) -> None:
        meter, self.meter = self.meter, None
        if meter is None:
            return
        try:
            done, total = self._coverage()  # notes may have come and gone meanwhile
        except Exception:  # an index closing under a stopping process: what is known
            done, total = meter.done, meter.total
        log.event(
            f"{self.name}_backlog_{how}",
            written=max(0, meter.done - meter.first),
            seconds=round(meter.elapsed(), 1),
            chunks_per_s=round(meter.average(), 1),
            done=done,
            total=total,
        )
        self._publish(None)

    def _record(self, meter: Meter) -> None:
        rate, eta = meter.rate(), meter.eta()
        self._publish(
            BacklogProgress(
                done=meter.done,
                total=meter.total or 0,
                rate=round(rate, 2) if rate is not None else None,
                eta_seconds=round(eta) if eta is not None else None,
                pid=os.getpid(),
                at=round(time.time(), 3),
            )
        )


def _figures(meter: Meter) -> dict[str, object]:
    rate, eta = meter.rate(), meter.eta()
    return {
        "done": meter.done,
        "total": meter.total,
        "chunks_per_s": round(rate, 1) if rate is not None else None,
        "eta_s": round(eta) if eta is not None else None,
    }
