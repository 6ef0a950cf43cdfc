"""Worker processes for the race tests: real OS processes (spawned), coordinated by a
barrier, each doing what a second server or a person's editor does to one note file."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

from vault_brain.errors import Conflict
from vault_brain.vault import writer
from vault_brain.vault.note import file_version


def replacer(root: str, rounds: int, me: int, barrier: Any, jobs: Any, results: Any) -> None:
    """Per round: wait for the other process, then replace the note with this process's
    text, naming the version the parent handed out. Reports "won" or "conflict"."""
    for _ in range(rounds):
        rel, version = jobs.get()
        barrier.wait()
        try:
            writer.replace_note_file(
                Path(root), rel, version, f"process {me} wrote {rel}\n".encode()
            )
            results.put((rel, me, "won"))
        except Conflict:
            results.put((rel, me, "conflict"))


def updater(root: str, rounds: int, exchange: bool, barrier: Any, jobs: Any, results: Any) -> None:
    """A model's memory_update: read the note, append a line, write it back naming the
    version read (refused with Conflict when the file changed since).

    exchange=False runs the writer as on a platform or file system that cannot exchange
    two names atomically (Windows, some network shares): rename plus a kept hard link."""
    if not exchange:
        writer._EXCHANGE = None
    rng = random.Random(1)
    for _ in range(rounds):
        rel = jobs.get()
        barrier.wait()
        _spin(rng.uniform(0, 0.001))
        path = Path(root) / rel
        raw = path.read_bytes()
        try:
            writer.replace_note_file(
                Path(root), rel, file_version(raw), raw + f"model line for {rel}\n".encode()
            )
            results.put((rel, "updated"))
        except Conflict:
            results.put((rel, "conflict"))


def deleter(root: str, rounds: int, barrier: Any, jobs: Any, results: Any) -> None:
    """A model's memory_delete: read the note, then trash it naming the version read."""
    rng = random.Random(3)
    for _ in range(rounds):
        rel = jobs.get()
        barrier.wait()
        _spin(rng.uniform(0, 0.001))
        raw = (Path(root) / rel).read_bytes()
        try:
            writer.trash_note_file(Path(root), rel, file_version(raw))
            results.put((rel, "deleted"))
        except Conflict:
            results.put((rel, "conflict"))


def editor(
    root: str,
    rounds: int,
    style: str,
    barrier: Any,
    jobs: Any,
    results: Any,
    gone_ok: bool = False,
) -> None:
    """A person's editor: reload the file, add a line, save, either in place (truncate and
    write, like many editors) or through a temp file renamed over the note; at a random
    moment within the time an update of a long note takes."""
    rng = random.Random(2)
    for _ in range(rounds):
        rel, marker = jobs.get()
        barrier.wait()
        _spin(rng.uniform(0, 0.015))
        path = Path(root) / rel
        outcome = "gone"
        for _attempt in range(1000):
            try:
                _save(path, path.read_bytes() + marker.encode() + b"\n", style)
                outcome = "saved"
                break
            except FileNotFoundError:
                if gone_ok:
                    break  # deleted: an editor shows the note as removed
                # Without an atomic exchange the writer moves the note aside for a few µs;
                # an editor sees a delete and a create, and reloads.
                time.sleep(0.0001)
        results.put((rel, outcome))


def _save(path: Path, data: bytes, style: str) -> None:
    if style == "in-place":
        with open(path, "r+b") as fh:
            fh.seek(0)
            fh.write(data)
            fh.truncate()
    else:
        tmp = path.with_name(f".{path.name}.editor~")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def _spin(seconds: float) -> None:
    """A busy wait: sleep() is too coarse to spread two processes over a window of µs."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
