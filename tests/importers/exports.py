"""Export files as the chat apps write them: the real field names and nesting of Claude's
and ChatGPT's conversations.json (with the fields we do not read, too), built in tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def claude_message(
    uuid: str, sender: str, text: str, at: str, *, blocks: list[dict] | None = None
) -> dict[str, Any]:
    """A chat_messages item: the text twice, as the export has it (`text` and `content`)."""
    return {
        "uuid": uuid,
        "text": text,
        "content": blocks
        if blocks is not None
        else [
            {
                "start_timestamp": at,
                "stop_timestamp": at,
                "type": "text",
                "text": text,
                "citations": [],
            }
        ],
        "sender": sender,
        "created_at": at,
        "updated_at": at,
        "attachments": [],
        "files": [],
    }


def claude_conversation(
    uuid: str, name: str, turns: list[tuple[str, str]], *, day: str = "2026-11-30"
) -> dict[str, Any]:
    """A conversation of (sender, text) turns, a minute apart from 09:00 UTC of `day`."""
    messages = [
        claude_message(f"{uuid}-m{i}", sender, text, f"{day}T09:{i:02d}:00.000000Z")
        for i, (sender, text) in enumerate(turns)
    ]
    return {
        "uuid": uuid,
        "name": name,
        "created_at": f"{day}T09:00:00.000000Z",
        "updated_at": f"{day}T09:{max(len(turns) - 1, 0):02d}:30.000000Z",
        "account": {"uuid": "acc-0001"},
        "chat_messages": messages,
    }


def chatgpt_node(
    node_id: str,
    role: str | None,
    text: str | None,
    parent: str | None,
    children: list[str],
    at: float | None,
    *,
    content: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    recipient: str = "all",
) -> dict[str, Any]:
    """One node of `mapping`; role None gives the structural root (message null)."""
    if role is None:
        return {"id": node_id, "message": None, "parent": parent, "children": children}
    return {
        "id": node_id,
        "message": {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": at,
            "update_time": None,
            "content": content
            if content is not None
            else {"content_type": "text", "parts": [text]},
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": metadata if metadata is not None else {},
            "recipient": recipient,
        },
        "parent": parent,
        "children": children,
    }


def chatgpt_conversation(
    cid: str, title: str | None, turns: list[tuple[str, str]], *, start: float = 1_795_000_000.0
) -> dict[str, Any]:
    """A linear conversation of (role, text) turns under a root and a system node."""
    ids = ["root", "sys"] + [f"{cid}-n{i}" for i in range(len(turns))]
    mapping = {
        "root": chatgpt_node("root", None, None, None, ["sys"], None),
        "sys": chatgpt_node(
            "sys",
            "system",
            "",
            "root",
            [ids[2]] if turns else [],
            None,
            metadata={"is_visually_hidden_from_conversation": True},
        ),
    }
    for i, (role, text) in enumerate(turns):
        node_id = ids[i + 2]
        children = [ids[i + 3]] if i + 3 < len(ids) else []
        mapping[node_id] = chatgpt_node(node_id, role, text, ids[i + 1], children, start + 60 * i)
    return {
        "title": title,
        "create_time": start,
        "update_time": start + 60 * max(len(turns) - 1, 0) + 30,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": ids[-1],
        "plugin_ids": None,
        "conversation_id": cid,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": cid,
    }


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8"
    )
    return path
