"""ChatGPT's data export (Settings → Data controls → Export data): conversations.json.

A JSON list of conversations: {id or conversation_id, title, create_time, update_time
(Unix seconds), current_node, mapping: {node id: {id, message, parent, children}}}. The
mapping is a tree: every edit and regenerated answer is a branch. The conversation as the
person last saw it is the path from `current_node` up through the parents, reversed.

Kept: what the user and the assistant said to each other. Left out: system and tool
messages, messages marked hidden, the assistant's calls to tools (recipient other than
"all"), reasoning ("thoughts", "reasoning_recap") and browsing noise. Text parts are
joined; an image part becomes "*[image]*"; code the assistant showed becomes a fence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vault_brain.errors import InvalidExport
from vault_brain.importers.reading import iso_time, iter_json_list, open_text, shape
from vault_brain.importers.records import ASSISTANT, USER, Conversation, Message

ROLES = {"user": USER, "assistant": ASSISTANT}
# Content types that are the model's working, not the conversation.
_NOT_SAID = frozenset(
    {
        "thoughts",
        "reasoning_recap",
        "tether_browsing_display",
        "tether_quote",
        "system_error",
        "user_editable_context",
        "model_editable_context",
        "execution_output",
        "sonic_webpage",
    }
)


def read(path: Path) -> Iterator[Conversation]:
    inside = ("conversations.json",)
    with open_text(path, inside) as (fh, name):
        for index, item in iter_json_list(fh, name, "conversations"):
            yield conversation(item, f"{name} [{index}]")


def conversation(item: Any, where: str) -> Conversation:
    if not isinstance(item, dict):
        raise InvalidExport(f"{where}: a conversation must be an object, not {shape(item)}")
    cid = item.get("conversation_id") or item.get("id")
    if not isinstance(cid, str) or not cid.strip():
        raise InvalidExport(
            f"{where}: the conversation has no 'id' or 'conversation_id' "
            "(is this ChatGPT's export?)"
        )
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise InvalidExport(
            f"{where}: 'mapping' must be an object of messages, not {shape(mapping)} "
            "(is this ChatGPT's export?)"
        )
    messages = []
    for node_id in _active_path(mapping, item.get("current_node"), where):
        message = _message(mapping[node_id], f"{where}.mapping[{node_id!r}]")
        if message is not None:
            messages.append(message)
    title = item.get("title")
    return Conversation(
        source="chatgpt",
        id=cid.strip(),
        title=title.strip() if isinstance(title, str) else "",
        created=iso_time(item.get("create_time")),
        updated=iso_time(item.get("update_time")),
        messages=tuple(messages),
        origin=where,
    )


def _active_path(mapping: dict[str, Any], current: Any, where: str) -> list[str]:
    """Node ids from the root to `current_node`. Without one (old exports), the path that
    follows the last child at every branch: the newest edit or regeneration."""
    for node_id, node in mapping.items():
        if not isinstance(node, dict):
            raise InvalidExport(
                f"{where}.mapping[{node_id!r}]: a node must be an object, not {shape(node)}"
            )
    if not isinstance(current, str) or current not in mapping:
        roots = [k for k, n in mapping.items() if n.get("parent") not in mapping]
        current = roots[0] if roots else None
        seen: set[str] = set()
        while current is not None and current not in seen:
            seen.add(current)
            children = [c for c in mapping[current].get("children") or [] if c in mapping]
            if not children:
                break
            current = children[-1]
    path: list[str] = []
    seen = set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        path.append(current)
        current = mapping[current].get("parent")
    path.reverse()
    return path


def _message(node: dict[str, Any], where: str) -> Message | None:
    m = node.get("message")
    if m is None:
        return None  # the root and other structural nodes
    if not isinstance(m, dict):
        raise InvalidExport(f"{where}: 'message' must be an object, not {shape(m)}")
    author = m.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str):
        raise InvalidExport(f"{where}: the message has no 'author.role'")
    metadata = m.get("metadata") if isinstance(m.get("metadata"), dict) else {}
    if role not in ROLES or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == "assistant" and m.get("recipient", "all") not in ("all", None):
        return None  # a call to a tool (python, browser, dalle), not an answer
    content = m.get("content")
    if not isinstance(content, dict):
        raise InvalidExport(f"{where}: the message has no 'content'")
    text = _content_text(content, where)
    if not text:
        return None
    return Message(ROLES[role], text, iso_time(m.get("create_time")))


def _content_text(content: dict[str, Any], where: str) -> str:
    kind = content.get("content_type")
    if kind in _NOT_SAID:
        return ""
    if kind == "code":
        code = content.get("text")
        lang = content.get("language") if isinstance(content.get("language"), str) else ""
        if not isinstance(code, str) or not code.strip():
            return ""
        fence = "````" if "```" in code else "```"
        return f"{fence}{'' if lang == 'unknown' else lang}\n{code.strip(chr(10))}\n{fence}"
    parts = content.get("parts")
    if parts is None and isinstance(content.get("text"), str):
        return content["text"].strip()
    if kind in ("text", "multimodal_text") and not isinstance(parts, list):
        raise InvalidExport(f"{where}: the message's content has no 'parts' list")
    if not isinstance(parts, list):
        return ""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            ptype = part.get("content_type")
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(ptype, str) and "image" in ptype:
                out.append("*[image]*")
            elif isinstance(ptype, str) and "audio" in ptype:
                out.append("*[audio]*")
    return "\n\n".join(p.strip() for p in out if p.strip())
