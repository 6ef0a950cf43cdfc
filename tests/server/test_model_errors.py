"""What a model is told when a call cannot go as asked (issue 25, item 8), over both real
transports: a name two notes share, a delete by title, and a CONFLICT that says what
actually differs and whether a retry with current.version is right."""

from __future__ import annotations

import uuid

from .harness import McpClient


def test_a_title_two_notes_share_is_invalid_input_listing_both(mcp: McpClient):
    title = f"Ideas {uuid.uuid4().hex[:8]}"
    a = mcp.ok("memory_save", {"title": title, "content": "for work", "folder": "Work"})
    b = mcp.ok("memory_save", {"title": title, "content": "for home", "folder": "Home"})
    reply = mcp.call("memory_get", {"id": title})
    assert reply.is_error
    assert reply.data["code"] == "INVALID_INPUT" and reply.data["retryable"] is False
    assert {(c["id"], c["path"]) for c in reply.data["candidates"]} == {
        (a["id"], a["path"]),
        (b["id"], b["path"]),
    }
    assert all(c["title"] == title for c in reply.data["candidates"])


def test_a_delete_by_title_answers_with_the_notes_id(mcp: McpClient):
    title = f"Scratch {uuid.uuid4().hex[:8]}"
    saved = mcp.ok("memory_save", {"title": title, "content": "to be deleted"})
    done = mcp.ok("memory_delete", {"id": title, "version": saved["version"]})
    assert done["id"] == saved["id"]


def test_a_conflict_after_the_models_own_update_is_retryable_and_says_so(mcp: McpClient):
    saved = mcp.ok("memory_save", {"title": f"Log {uuid.uuid4().hex[:8]}", "content": "one"})
    first = mcp.ok("memory_get", {"id": saved["id"]})["version"]
    mcp.ok("memory_update", {"id": saved["id"], "version": first, "append": "two"})
    reply = mcp.call("memory_update", {"id": saved["id"], "version": first, "append": "three"})
    assert reply.is_error and reply.data["code"] == "CONFLICT"
    assert reply.data["reason"] == "your_update" and reply.data["retryable"] is True
    assert "someone" not in reply.data["message"]
    retry = {"id": saved["id"], "version": reply.data["current"]["version"], "append": "three"}
    mcp.ok("memory_update", retry)


def test_a_conflict_on_a_made_up_version_is_retryable_and_says_so(mcp: McpClient):
    saved = mcp.ok("memory_save", {"title": f"Log {uuid.uuid4().hex[:8]}", "content": "one"})
    reply = mcp.call("memory_update", {"id": saved["id"], "version": "latest", "append": "x"})
    assert reply.data["code"] == "CONFLICT" and reply.data["reason"] == "unknown_version"
    assert reply.data["retryable"] is True and "someone" not in reply.data["message"]
