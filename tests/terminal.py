"""The CLI on a real pseudo-terminal, as a person runs it: rich draws its bars, Ctrl-C
reaches the whole process group, and what stays on the screen is read back through a
terminal emulator (pyte), so a line that was drawn and then erased does not count."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pyte

from tests.waiting import HANG_SECONDS

COLUMNS, LINES = 120, 60
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


class Terminal:
    """`python -m vault_brain ARGS` with a pty as stdin, stdout and stderr."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        full_env.update(env or {})
        full_env.setdefault("TERM", "xterm-256color")
        full_env.pop("NO_COLOR", None)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        # A session of its own, like a shell's foreground job: killpg reaches its workers.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vault_brain", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=full_env,
            start_new_session=True,
        )
        os.close(slave)
        self._master = master
        self._raw = bytearray()
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._master], [], [], 0.2)
            if not ready:
                if self.proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(self._master, 65536)
            except OSError:  # EIO: the other end is closed
                break
            if not data:
                break
            with self._cond:
                self._raw += data
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def text(self) -> str:
        """Everything written, escape codes removed, carriage returns as line ends."""
        with self._cond:
            raw = bytes(self._raw)
        return ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "\n")

    def screen(self) -> list[str]:
        """The lines a person sees on the terminal now (scrolled-off lines included)."""
        with self._cond:
            raw = bytes(self._raw)
        screen = pyte.HistoryScreen(COLUMNS, LINES, history=10_000)
        stream = pyte.ByteStream(screen)
        stream.feed(raw)
        history = ["".join(line[x].data for x in range(COLUMNS)) for line in screen.history.top]
        lines = [line.rstrip() for line in history + list(screen.display)]
        return [line for line in lines if line]

    def wait_for(self, pattern: str, timeout: float = 300) -> re.Match:
        """The first match of `pattern` in the output; waits for it to be written."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        with self._cond:
            while True:
                found = regex.search(self.text)
                if found:
                    return found
                if time.monotonic() > deadline or not self._reader.is_alive():
                    raise AssertionError(
                        f"no {pattern!r} on the terminal (exit {self.proc.poll()}):\n"
                        + self.text[-3000:]
                    )
                self._cond.wait(0.2)

    def ctrl_c(self) -> None:
        """What Ctrl-C at a terminal does: SIGINT to the whole foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait(self, timeout: float = 600) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(HANG_SECONDS)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(HANG_SECONDS)
        self._reader.join(HANG_SECONDS)
        try:
            os.close(self._master)
        except OSError:
            pass


def write_notes(root: Path, count: int, words: int = 12, folder: str = "n") -> None:
    """`count` short notes of one chunk each, every one different."""
    vocabulary = (
        "river garden kernel cache deploy tea lantern orbit pepper maple signal harbor "
        "violin quartz meadow copper ember willow falcon basalt"
    ).split()
    (root / folder).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        body = " ".join(vocabulary[(i * 7 + k * 3) % len(vocabulary)] for k in range(words))
        (root / folder / f"note {i:05d}.md").write_text(
            f"# Note {i}\n\n{body} number {i}.\n", encoding="utf-8"
        )
