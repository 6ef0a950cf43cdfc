"""Claude's data export (Settings → Privacy → Export data): conversations.json.

A JSON list of conversations: {uuid, name, created_at, updated_at, chat_messages: [...]},
each message {uuid, sender: "human" | "assistant", text, content: [{type: "text", text},
...], created_at, attachments: [{file_name, extracted_content}], files: [{file_name}]}.
The text is read from the `text` blocks of `content` when there are any, else from `text`;
thinking and tool blocks are left out. Attachments are named, not copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vault_brain.errors import InvalidExport
from vault_brain.importers.reading import block_text, iso_time, iter_json_list, open_text, shape
from vault_brain.importers.records import ASSISTANT, USER, Conversation, Message

SENDERS = {"human": USER, "user": USER, "assistant": ASSISTANT}


def read(path: Path) -> Iterator[Conversation]:
    with open_text(path, ("conversations.json",)) as (fh, name):
        for index, item in iter_json_list(fh, name, "conversations"):
            yield conversation(item, f"{name} [{index}]")


def conversation(item: Any, where: str) -> Conversation:
    if not isinstance(item, dict):
        raise InvalidExport(f"{where}: a conversation must be an object, not {shape(item)}")
    uuid = item.get("uuid")
    if not isinstance(uuid, str) or not uuid.strip():
        raise InvalidExport(f"{where}: the conversation has no 'uuid' (is this Claude's export?)")
    raw = item.get("chat_messages")
    if not isinstance(raw, list):
        raise InvalidExport(
            f"{where}: 'chat_messages' must be a list, not {shape(raw)} (is this Claude's export?)"
        )
    messages = []
    for i, m in enumerate(raw):
        message = _message(m, f"{where}.chat_messages[{i}]")
        if message is not None:
            messages.append(message)
    name = item.get("name")
    return Conversation(
        source="claude",
        id=uuid.strip(),
        title=name.strip() if isinstance(name, str) else "",
        created=iso_time(item.get("created_at")),
        updated=iso_time(item.get("updated_at")),
        messages=tuple(messages),
        origin=where,
    )


def _message(m: Any, where: str) -> Message | None:
    """The message, or None when it holds no text to keep (only tool calls, say)."""
    if not isinstance(m, dict):
        raise InvalidExport(f"{where}: a message must be an object, not {shape(m)}")
    sender = m.get("sender")
    if sender not in SENDERS:
        raise InvalidExport(f'{where}: \'sender\' must be "human" or "assistant", not {sender!r}')
    content, text = m.get("content"), m.get("text")
    if not isinstance(content, list) and not isinstance(text, str):
        raise InvalidExport(f"{where}: the message has no text (neither 'text' nor 'content')")
    body = block_text(content) if isinstance(content, list) else ""
    if not body and isinstance(text, str):
        body = text.strip()
    names = [
        a["file_name"]
        for key in ("attachments", "files")
        for a in (m.get(key) or [])
        if isinstance(a, dict) and isinstance(a.get("file_name"), str) and a["file_name"]
    ]
    if names:
        attached = ", ".join(dict.fromkeys(names))
        body = (body + "\n\n" if body else "") + f"*Attached: {attached}*"
    if not body:
        return None
    return Message(SENDERS[sender], body, iso_time(m.get("created_at")))
