"""What every export format is read into: conversations of messages, plain and small."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

USER = "user"
ASSISTANT = "assistant"


@dataclass(frozen=True)
class Message:
    role: str  # "user", "assistant", or another speaker's name as the log gives it
    text: str  # Markdown as the chat showed it, stripped, never empty
    created: str | None  # ISO 8601 UTC "2026-11-30T14:10:00Z", or None when the export has none


@dataclass(frozen=True)
class Conversation:
    source: str  # the export format: "claude", "chatgpt", "jsonl"
    id: str  # the conversation's id in that export
    title: str  # its name in the export; "" when it has none
    created: str | None  # ISO 8601 UTC
    updated: str | None
    messages: tuple[Message, ...]
    origin: str  # where it was read: "conversations.json [3]", for messages to a person

    @property
    def key(self) -> str:
        """`claude:<uuid>`: the conversation's name in `source:` and `imported:`."""
        return f"{self.source}:{self.id}"


def message_hashes(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    """A content hash per message (12 hex characters): the speaker and the text, plus how
    often the same speaker said the same words before in this conversation, so a second
    "yes" is a message of its own. Stable when a conversation grows at its end, and
    independent of ids and times, which some logs lack or rewrite."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for m in messages:
        text = "\n".join(line.rstrip() for line in m.text.strip().splitlines())
        n = seen.get((m.role, text), 0)
        seen[(m.role, text)] = n + 1
        data = f"{m.role}\0{text}\0{n}".encode("utf-8", "surrogatepass")
        out.append(hashlib.blake2b(data, digest_size=6).hexdigest())
    return out
