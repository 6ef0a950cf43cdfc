"""Chat logs as JSON lines: one message per line, in the order they were said.

Accepted fields (the first present wins):

- speaker: `role`, `sender` or `author` (text, or an object with `role`). user/human are the
  user; assistant/ai/bot/model the assistant; system, tool, function and developer lines are
  left out; any other name is kept as the speaker's.
- text: `content`, `text` or `message`: text, or a list of blocks ({"type": "text", "text"}
  or plain strings; other blocks are left out).
- `message` may also be an object holding `role` and `content` (Claude Code's transcripts).
- conversation: `conversation_id`, `session_id` or `sessionId`; lines without one belong to
  one conversation named after the file.
- time: `timestamp`, `created_at` or `create_time` (ISO 8601, or Unix seconds or ms).

A line with neither a speaker nor a text field (a log's own events) is skipped; a line
with one but not the other is an error, as is a line that is not a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vault_brain.errors import InvalidExport
from vault_brain.importers.reading import block_text, iso_time, open_text, shape
from vault_brain.importers.records import ASSISTANT, USER, Conversation, Message

ROLE_FIELDS = ("role", "sender", "author")
TEXT_FIELDS = ("content", "text", "message")
CONVERSATION_FIELDS = ("conversation_id", "session_id", "sessionId")
TIME_FIELDS = ("timestamp", "created_at", "create_time")
ROLES = {
    "user": USER,
    "human": USER,
    "assistant": ASSISTANT,
    "ai": ASSISTANT,
    "bot": ASSISTANT,
    "model": ASSISTANT,
}
LEFT_OUT = frozenset({"system", "tool", "function", "developer"})


def read(path: Path) -> Iterator[Conversation]:
    """Conversations in the order they first appear in the file."""
    chats: dict[str, list[Message]] = {}
    first_line: dict[str, int] = {}
    with open_text(path, ()) as (fh, name):
        lineno = 0
        while True:
            try:
                line = fh.readline()
            except UnicodeDecodeError:
                raise InvalidExport(f"{name}: line {lineno + 1}: not UTF-8 text") from None
            if not line:
                break
            lineno += 1
            if not line.strip():
                continue
            where = f"{name}: line {lineno}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidExport(
                    f"{where}, column {exc.colno}: not valid JSON ({exc.msg})"
                ) from None
            except RecursionError:
                raise InvalidExport(f"{where}: JSON nested too deeply") from None
            found = _message(item, where)
            if found is None:
                continue
            key, message = found
            key = key or path.stem
            first_line.setdefault(key, lineno)
            chats.setdefault(key, [])
            if message is not None:
                chats[key].append(message)
    for key, messages in chats.items():
        times = [m.created for m in messages if m.created]
        yield Conversation(
            source="jsonl",
            id=key,
            title="",
            created=min(times) if times else None,
            updated=max(times) if times else None,
            messages=tuple(messages),
            origin=f"{name}: line {first_line[key]}",
        )


def _first(item: dict[str, Any], fields: tuple[str, ...]) -> Any:
    for field in fields:
        if item.get(field) is not None:
            return item[field]
    return None


def _message(item: Any, where: str) -> tuple[str | None, Message | None] | None:
    """(conversation id, the message or None when it says nothing to keep), or None for a
    line that is not a message at all."""
    if not isinstance(item, dict):
        raise InvalidExport(f"{where}: a line must be a JSON object, not {shape(item)}")
    inner = item.get("message") if isinstance(item.get("message"), dict) else None
    role_value = _first(item, ROLE_FIELDS)
    text_value = _first(item, TEXT_FIELDS[:2]) if inner else _first(item, TEXT_FIELDS)
    if inner is not None:
        role_value = inner.get("role", role_value)
        text_value = _first(inner, ("content", "text")) if text_value is None else text_value
    if role_value is None and text_value is None:
        return None
    if isinstance(role_value, dict):
        role_value = role_value.get("role")
    if not isinstance(role_value, str) or not role_value.strip():
        raise InvalidExport(
            f"{where}: the message has no speaker (a 'role', 'sender' or 'author' field)"
        )
    if text_value is None:
        raise InvalidExport(
            f"{where}: the message has no text (a 'content', 'text' or 'message' field)"
        )
    if isinstance(text_value, str):
        text = text_value.strip()
    elif isinstance(text_value, list):
        text = block_text(text_value)
    else:
        raise InvalidExport(
            f"{where}: the message's text must be text or a list of blocks, not {shape(text_value)}"
        )
    conversation = _first(item, CONVERSATION_FIELDS)
    key = str(conversation).strip() if isinstance(conversation, str | int) else None
    role = role_value.strip()
    if role.lower() in LEFT_OUT or item.get("isSidechain") is True or not text:
        return key or None, None
    time = iso_time(_first(item, TIME_FIELDS))
    return key or None, Message(ROLES.get(role.lower(), role), text, time)
