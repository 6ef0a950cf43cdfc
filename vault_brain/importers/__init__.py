"""Chat exports read into plain Conversation records: Claude's and ChatGPT's data exports
(conversations.json, or the .zip they come in) and JSON-lines chat logs.

Parsing only: nothing here touches the vault. Every file is read whole before anything
is written, and any problem raises InvalidExport naming the file and the place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from vault_brain.errors import InvalidExport
from vault_brain.importers import chatgpt, claude, jsonl
from vault_brain.importers.records import Conversation, Message, message_hashes

__all__ = ["FORMATS", "Conversation", "Message", "message_hashes", "read_export"]

READERS: dict[str, Callable[[Path], Iterator[Conversation]]] = {
    "claude": claude.read,
    "chatgpt": chatgpt.read,
    "jsonl": jsonl.read,
}
FORMATS = tuple(READERS)


def read_export(fmt: str, paths: Iterable[str | Path]) -> list[Conversation]:
    """Every conversation of every file, in order. Raises InvalidExport."""
    reader = READERS.get(fmt)
    if reader is None:
        raise InvalidExport(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    out: list[Conversation] = []
    for path in paths:
        out.extend(reader(Path(path)))
    return out
