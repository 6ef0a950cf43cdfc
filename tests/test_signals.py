"""A signal that arrives while the process writes a log line must still stop it cleanly.

The race seen in CI (test_warm's watcher did not exit on SIGTERM, 2 runs in ~10 under load):
SIGTERM landed while the main thread held the log's lock (writing `warm_socket`), and the
handler, running on that same thread, logged `watch_signal` and waited for the lock forever.
Here the signal is sent from inside the write itself, so the race is hit every time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import HANG_SECONDS

REPO = Path(__file__).resolve().parents[1]

# Replaces stderr with a stream that sends `SIG` to this process in the middle of writing
# the first line holding `MARK`: Python runs the handler right there, inside log's lock.
TRAP = """
import os, signal, sys
SIG, MARK = signal.{sig}, {mark!r}

class Trap:
    def __init__(self, real):
        self.real, self.sprung = real, False
    def write(self, text):
        if not self.sprung and MARK in text:
            self.sprung = True
            os.kill(os.getpid(), SIG)
            sum(range(1000))  # bytecode here: the handler runs inside the write
        return self.real.write(text)
    def flush(self):
        self.real.flush()
    def __getattr__(self, name):
        return getattr(self.real, name)

sys.stderr = Trap(sys.stderr)
"""


def _run(script: str, *, timeout: float = HANG_SECONDS) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["VAULT_BRAIN_EMBED_PROVIDER"] = "none"
    try:
        return subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process hung (deadlock); stderr so far: {exc.stderr!r}")


def test_a_log_line_written_by_a_signal_handler_during_another_does_not_deadlock():
    script = TRAP.format(sig="SIGUSR1", mark="outer") + textwrap.dedent(
        """
        from vault_brain import log
        signal.signal(signal.SIGUSR1, lambda *_: log.event("from_handler"))
        log.event("outer")
        print("returned")
        """
    )
    r = _run(script)
    assert r.returncode == 0 and r.stdout.strip() == "returned", r.stderr
    events = [json.loads(line)["event"] for line in r.stderr.splitlines()]
    assert sorted(events) == ["from_handler", "outer"]  # both lines whole, none lost


def _assert_watch_stops_cleanly(tmp_path: Path, prelude: str) -> None:
    """`vault-brain watch` on a one-note vault, run after `prelude` (the code that sends
    the signal): it must exit 0, having logged the signal and then its stop."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# A note\n\nSome words.\n", encoding="utf-8")
    script = prelude + textwrap.dedent(
        f"""
        from vault_brain.cli import main
        sys.argv = ["vault-brain", "watch", "--vault", {str(vault)!r}]
        main()
        """
    )
    r = _run(script)
    events = [json.loads(line).get("event") for line in r.stderr.splitlines() if "{" in line]
    assert r.returncode == 0, r.stderr[-2000:]
    assert "watch_signal" in events and events[-1] == "watch_stopped", events


@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="no SIGTERM here")
def test_sigterm_while_the_watcher_logs_stops_it_cleanly(tmp_path):
    _assert_watch_stops_cleanly(tmp_path, TRAP.format(sig="SIGTERM", mark='"warm_socket"'))


# Sent to this thread only (pthread_kill), once the main thread waits for a signal: as when
# the kernel hands a process's SIGTERM to the observer's thread. Seen in CI: a watcher whose
# main thread slept in an untimed Event.wait() and never ran the handler.
OTHER_THREAD = """
import signal, sys, threading, time

def strike():
    main = threading.main_thread().ident
    for _ in range(60_000):  # at most ten minutes; the test's own bound fails first
        frame, names = sys._current_frames().get(main), []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        if "_run_until_signal" in names and names[0] in ("_run_until_signal", "wait"):
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            return
        time.sleep(0.01)

threading.Thread(target=strike, daemon=True).start()
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="no thread-directed signals")
def test_sigterm_delivered_to_another_thread_stops_the_watcher(tmp_path):
    _assert_watch_stops_cleanly(tmp_path, OTHER_THREAD)
