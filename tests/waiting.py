"""Waiting in tests: for the event, never for a fixed time.

A test that must wait polls for what it waits for. Its deadline only catches a hang, so it
lies far beyond what any machine needs, loaded or not: a test never fails because a machine
is slow or busy (speed is measured in bench/, not here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# How long a test waits for something that takes milliseconds to seconds before it calls it
# a hang. A timeout passed to a subprocess, a join or a socket read is at least this.
HANG_SECONDS = 120.0


def wait_until(
    check: Callable[[], T], what: str, timeout: float = HANG_SECONDS, every: float = 0.02
) -> T:
    """Poll `check` until it returns something true, and return that; fail saying `what`
    was still not the case after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: still not the case after {timeout:g} s"
        time.sleep(every)
