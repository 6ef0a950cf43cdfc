"""A watcher in its own process, for the crash, hand-over and permission tests.

As a script: `python tests/watch_proc.py VAULT [--poll] [--debounce MS]` runs the real
`vault-brain watch` (embeddings off) until SIGINT/SIGTERM.
As a module: `WatchProcess` starts one and follows its JSON log lines on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # imported as `watch_proc`, or run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.waiting import HANG_SECONDS  # noqa: E402


class WatchProcess:
    def __init__(
        self,
        vault: Path,
        *,
        poll: bool = False,
        debounce_ms: int = 50,
        prefix: Sequence[str] = (),
        index_url: str | None = None,
    ) -> None:
        args = [*prefix, sys.executable, __file__, str(vault), "--debounce", str(debounce_ms)]
        if poll:
            args.append("--poll")
        if index_url:
            args += ["--index-url", index_url]
        # Its own process group: kill() takes the sync's worker processes down with it,
        # as a crash of the whole program would (and leaves no orphans behind).
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.events: list[dict] = []
        self.other: list[str] = []  # stderr lines that are not JSON (tracebacks)
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            with self._cond:
                if isinstance(record, dict):
                    self.events.append(record)
                else:
                    self.other.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def count(self, name: str, **fields: object) -> int:
        with self._cond:
            return sum(1 for e in self.events if _matches(e, name, fields))

    def wait_for(
        self, name: str, timeout: float = HANG_SECONDS, after: int = 0, **fields: object
    ) -> dict:
        """The first log event `name` (with these field values) beyond the first `after`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if _matches(e, name, fields)]
                if len(found) > after:
                    return found[after]
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no {name} event; exit={self.proc.poll()} other={self.other[-5:]}"
                    )
                self._cond.wait(min(left, 0.2))

    def pause(self) -> None:
        """SIGSTOP the watcher and every process it started: it stands where it is."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def kill(self) -> None:
        """SIGKILL the watcher and every process it started."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(HANG_SECONDS)

    def terminate(self, timeout: float = HANG_SECONDS) -> int:
        """SIGTERM, then its exit status. A watcher that does not exit in time is made to
        print every thread's stack (faulthandler, SIGUSR1) and the failure carries them."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGUSR1)
            self._reader.join(5)  # the dump is written at once; give the reader a moment
            with self._cond:
                stacks = "\n".join(self.other[-80:])
            raise AssertionError(
                f"the watcher did not exit on SIGTERM; its threads:\n{stacks}"
            ) from None

    def close(self) -> None:
        self.kill()
        self._reader.join(5)


def _matches(event: dict, name: str, fields: dict) -> bool:
    return event.get("event") == name and all(event.get(k) == v for k, v in fields.items())


def main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("vault")
    parser.add_argument("--poll", action="store_true")
    parser.add_argument("--debounce", type=int, default=50)
    parser.add_argument("--index-url", default=None)
    args = parser.parse_args(argv)
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # WatchProcess.terminate's probe
    for name in [k for k in os.environ if k.startswith("VAULT_BRAIN_")]:
        del os.environ[name]
    os.environ["VAULT_BRAIN_EMBED_PROVIDER"] = "none"
    if args.index_url:
        os.environ["VAULT_BRAIN_INDEX_URL"] = args.index_url
    sys.argv = ["vault-brain", "watch", "--vault", args.vault, "--debounce", str(args.debounce)]
    if args.poll:
        sys.argv.append("--poll")
    from vault_brain.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
