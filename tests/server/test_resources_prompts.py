"""Notes as MCP resources (`note://{id}`, `vault://recent`, `vault://status`) and the two
prompts, through both real transports: what a client that browses resources or offers
prompts (a slash menu, an attach button) gets without a tool call."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams

from .harness import NOTES, stdio_client_for, write_vault


def uris(result) -> list[str]:
    return [str(r.uri) for r in result.resources]


def test_the_note_template_is_offered(mcp):
    templates = mcp.rpc("list_resource_templates").resource_templates
    assert [t.uri_template for t in templates] == ["note://{id}"]
    assert templates[0].mime_type == "text/markdown"


def test_resources_list_offers_recent_status_and_the_notes(mcp):
    listed = mcp.rpc("list_resources")
    found = uris(listed)
    assert found[:2] == ["vault://recent", "vault://status"]
    assert "note://rel00001" in found
    note = next(r for r in listed.resources if str(r.uri) == "note://rel00001")
    assert note.title == "Release checklist" and note.name == "How-to/Release checklist.md"
    assert note.description == "Steps before tagging a release."
    assert note.mime_type == "text/markdown"


def test_reading_a_note_resource_gives_its_markdown(mcp):
    read = mcp.rpc("read_resource", "note://rel00001")
    (content,) = read.contents
    assert str(content.uri) == "note://rel00001" and content.mime_type == "text/markdown"
    assert content.text.startswith("# Release checklist")
    assert "Freeze the branch" in content.text
    assert "id: rel00001" not in content.text  # the body, as memory_get gives it
    assert content.meta["version"] and content.meta["path"] == "How-to/Release checklist.md"


def test_a_note_resource_also_answers_to_a_path_or_a_title(mcp):
    by_path = mcp.rpc("read_resource", "note://How-to%2FDeploy%20guide.md")
    by_title = mcp.rpc("read_resource", "note://Deploy%20guide")
    assert "Canary first" in by_path.contents[0].text
    assert by_title.contents[0].text == by_path.contents[0].text


def test_an_unknown_note_resource_is_an_error_that_says_so(mcp):
    with pytest.raises(MCPError) as caught:
        mcp.rpc("read_resource", "note://no-such-note")
    assert "no-such-note" in str(caught.value) and "memory_search" in str(caught.value)


def test_an_unknown_resource_scheme_is_an_error_naming_the_ones_there_are(mcp):
    with pytest.raises(MCPError) as caught:
        mcp.rpc("read_resource", "file:///etc/passwd")
    assert "note://" in str(caught.value)


def test_recent_lists_the_newest_notes_as_json(mcp):
    mcp.ok("memory_save", {"title": "Fresh idea", "content": "A kite that maps the wind."})
    read = mcp.rpc("read_resource", "vault://recent")
    assert read.contents[0].mime_type == "application/json"
    notes = json.loads(read.contents[0].text)["notes"]
    assert notes[0]["title"] == "Fresh idea"
    assert {"id", "title", "path", "summary", "updated"} <= set(notes[0])
    assert len(notes) >= len(NOTES) + 1


def test_status_says_what_the_index_holds(mcp):
    status = json.loads(mcp.rpc("read_resource", "vault://status").contents[0].text)
    assert status["notes"] >= len(NOTES) and status["status"] in ("ok", "indexing", "degraded")
    assert str(mcp.vault) not in json.dumps(status)


def test_two_prompts_are_offered(mcp):
    prompts = {p.name: p for p in mcp.rpc("list_prompts").prompts}
    assert set(prompts) == {"notes_about", "save_decisions"}
    assert [a.name for a in prompts["notes_about"].arguments if a.required] == ["topic"]


def test_notes_about_brings_the_matching_notes_into_the_prompt(mcp):
    got = mcp.rpc("get_prompt", "notes_about", {"topic": "release checklist"})
    (message,) = got.messages
    assert message.role == "user"
    text = message.content.text
    assert "release checklist" in text.lower() and "rel00001" in text
    assert "memory_get" in text  # how to read one in full


def test_notes_about_without_a_topic_is_an_error(mcp):
    with pytest.raises(MCPError) as caught:
        mcp.rpc("get_prompt", "notes_about", {})
    assert "topic" in str(caught.value)


def test_save_decisions_asks_to_look_first_and_save_or_append(mcp):
    got = mcp.rpc("get_prompt", "save_decisions", {"topic": "pricing", "folder": "Decisions"})
    text = got.messages[0].content.text
    assert "pricing" in text and "Decisions" in text
    for step in ("memory_search", "memory_update", "memory_save"):
        assert step in text


def test_a_read_only_vault_offers_no_prompt_that_writes(tmp_path):
    vault = write_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path, env={"VAULT_BRAIN_WRITE_READ_ONLY": "true"})
    try:
        assert [p.name for p in client.rpc("list_prompts").prompts] == ["notes_about"]
        with pytest.raises(MCPError) as caught:
            client.rpc("get_prompt", "save_decisions", {})
        assert "read-only" in str(caught.value)
    finally:
        client.close()


def test_every_note_is_listed_once_across_pages(tmp_path):
    vault = tmp_path / "vault"
    for n in range(130):
        (vault / f"Shelf {n % 4}").mkdir(parents=True, exist_ok=True)
        (vault / f"Shelf {n % 4}" / f"Book {n}.md").write_text(f"# Book {n}\n\nchapter {n}\n")
    client = stdio_client_for(vault, tmp_path)
    try:
        client.wait_indexed()
        seen, cursor, pages = [], None, 0
        while True:
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            page = client.rpc("list_resources", params=params)
            seen += uris(page)
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        notes = [u for u in seen if u.startswith("note://")]
        assert pages >= 2 and len(notes) == len(set(notes)) == 130
        assert seen.count("vault://recent") == 1
    finally:
        client.close()
