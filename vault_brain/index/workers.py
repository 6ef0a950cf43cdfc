"""Parse worker processes for big syncs: parsing and chunking are CPU-bound Python.

Workers are started as `python -m vault_brain.index.workers`, not with multiprocessing's
spawn: spawn re-imports the caller's `__main__`, so a script that calls `Brain.sync()`
without an `if __name__ == "__main__"` guard would run itself again in every worker. A
worker reads length-prefixed pickles on stdin and answers on stdout; it exits when stdin
closes, so a killed indexer (even kill -9 while workers still start up) leaves none behind.

Each worker's answers are read and unpickled by a thread of its own, as soon as they are
written: a worker never waits for the indexer to come and read (its pipe holds 64 KB, an
answer is ~0.5 MB), and the reading overlaps the indexer's own storing instead of taking
turns with it in one thread.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from typing import IO, Any

_HEADER = struct.Struct("<Q")
CHUNK = 32  # files per message: small enough that a pipe never fills with requests
IN_FLIGHT = 2  # messages queued per worker, so none waits for the next one
MAX_MESSAGE = 1 << 34  # a length beyond this is stray output on the pipe, not a message
# What a worker writes first on its protocol pipe, once fd 1 is stderr: anything before it is
# what a library printed while the worker started up (a sitecustomize, an import), which the
# reader passes on to stderr instead of reading it as a message.
_START = b"\x00vault-brain parse worker\x00"
MAX_STRAY = 1 << 20  # bytes of start-up output before _START that are passed on


def _send(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(head)
    if size > MAX_MESSAGE:
        raise pickle.UnpicklingError(f"message of {size} bytes: not our protocol")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class WorkerError(RuntimeError):
    """A worker died or answered nonsense; the caller parses in-process instead."""


def _skip_start_up_output(stream: IO[bytes]) -> None:
    """Read up to the worker's _START mark; what came before it goes to stderr."""
    seen = bytearray()
    while not seen.endswith(_START):
        byte = stream.read(1)
        if not byte:
            raise EOFError
        seen += byte
        if len(seen) > MAX_STRAY:
            raise pickle.UnpicklingError("no start mark from the parse worker")
    stray = bytes(seen[: -len(_START)])
    if stray:
        try:
            sys.stderr.buffer.write(stray)
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):  # no binary stderr: dropped
            pass


def _read_answers(stream: IO[bytes], answers: queue.SimpleQueue) -> None:
    """A reader thread: every answer of one worker, in order, then the error that ended
    them (EOF when the worker exits)."""
    try:
        _skip_start_up_output(stream)
    except Exception as exc:  # noqa: BLE001 - EOF, a closed pipe, no mark: the end
        answers.put(exc)
        return
    while True:
        try:
            answers.put(_receive(stream))
        except Exception as exc:  # noqa: BLE001 - EOF, a closed pipe, stray bytes: the end
            answers.put(exc)
            return


class ParsePool:
    """Ordered `map` of `index.prepare.prepare` over jobs, in worker processes."""

    def __init__(self, context: tuple[Any, ...], workers: int) -> None:
        self._context = context
        self._count = max(1, workers)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._answers: list[queue.SimpleQueue] = []
        self._readers: list[threading.Thread] = []
        self._unanswered = 0  # messages sent whose answer map has not taken yet

    def __enter__(self) -> ParsePool:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        for _ in range(self._count):
            proc = subprocess.Popen(
                [sys.executable, "-m", "vault_brain.index.workers"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            self._procs.append(proc)
            answers: queue.SimpleQueue = queue.SimpleQueue()
            reader = threading.Thread(
                target=_read_answers,
                args=(proc.stdout, answers),
                name="parse-worker-reader",
                daemon=True,
            )
            reader.start()
            self._answers.append(answers)
            self._readers.append(reader)
            _send(proc.stdin, self._context)  # type: ignore[arg-type]
        return self

    def map(self, jobs: Sequence[Any]) -> Iterator[Any]:
        parts = [list(jobs[i : i + CHUNK]) for i in range(0, len(jobs), CHUNK)]
        waiting: deque[int] = deque()  # which worker answers the next message, in order
        sent = 0
        try:
            while sent < len(parts) and sent < self._count * IN_FLIGHT:
                self._post(sent, parts[sent], waiting)
                sent += 1
            while waiting:
                worker = waiting.popleft()
                results = self._answers[worker].get()
                self._unanswered -= 1
                if isinstance(results, BaseException):
                    raise results
                if sent < len(parts):
                    self._post(sent, parts[sent], waiting)
                    sent += 1
                yield from results
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise WorkerError(f"a parse worker failed ({type(exc).__name__})") from exc

    def _post(self, number: int, part: list[Any], waiting: deque[int]) -> None:
        worker = number % self._count
        _send(self._procs[worker].stdin, part)  # type: ignore[arg-type]
        self._unanswered += 1
        waiting.append(worker)

    def __exit__(self, *exc: object) -> None:
        # Closing stdin ends an idle worker. One with work still queued (a pass that stopped
        # early: Ctrl-C, an error) is killed: its answers are not wanted, and its exit ends
        # its reader thread (EOF) before the pipe is closed under it.
        for proc in self._procs:
            try:
                proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        if self._unanswered:
            for proc in self._procs:
                proc.kill()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        for proc in self._procs:
            try:
                proc.stdout.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self._procs, self._answers, self._readers = [], [], []


def _serve() -> None:
    """The worker's loop: the first message is (settings, summarize, the instant model's
    settings or None), then lists of jobs."""
    import signal

    from vault_brain import log
    from vault_brain.index.prepare import prepare, with_vectors
    from vault_brain.vault.reading import NoteReader

    # Ctrl-C at a terminal reaches the whole process group: the indexer decides when to
    # stop (after its current batch) and closes the pipes, which ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log.set_quiet(True)
    stdin = sys.stdin.buffer
    # The protocol gets its own copy of stdout; fd 1 becomes stderr, so a stray print in
    # any library can never corrupt a message.
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdout.write(_START)
    stdout.flush()
    try:
        settings, summarize, embed = _receive(stdin)
        embedder = _embedder(embed)
        # The vault's real path, once for the worker (each resolution is an lstat per
        # component; per file it was ~3 % of a cold index's parsing).
        root = settings.vault_path
        reader = NoteReader(root, settings.vault.follow_outside)
        while True:
            jobs = _receive(stdin)
            done = [prepare(root, s, h, settings, summarize, reader) for s, h in jobs]
            if embedder is not None:
                try:
                    done = with_vectors(done, embedder)
                except Exception:  # noqa: BLE001 - any model failure: the vector queue retries
                    # The indexer's own vector phase makes them, and reports what failed.
                    embedder = None
            _send(stdout, done)
    except (EOFError, BrokenPipeError):
        return


def _embedder(settings: Any) -> Any:
    """The instant tier's model as the indexer has it (EmbedSettings), or None: vectors are
    made here, beside the parsing, only when the indexer sent its model's settings."""
    if settings is None:
        return None
    from vault_brain.embed.local import LocalEmbedder

    return LocalEmbedder(settings)


if __name__ == "__main__":
    _serve()
