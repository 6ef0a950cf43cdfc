"""Every tool and every error code, over both real transports (stdio subprocess, HTTP)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tests.waiting import wait_until

from .harness import McpClient, files_under


def unique(word: str) -> str:
    """A term no other test's note contains, so searches are exact."""
    return f"{word}{uuid.uuid4().hex[:10]}"


def save(mcp: McpClient, content: str, **extra: object) -> dict:
    return mcp.ok("memory_save", {"title": unique("Note "), "content": content, **extra})


# ---- memory_search ----


def test_search_returns_compact_hits_with_the_agreed_fields(mcp):
    data = mcp.ok("memory_search", {"query": "release checklist"})
    assert set(data) == {"results", "degraded"}
    hit = data["results"][0]
    assert set(hit) == {
        "id",
        "title",
        "path",
        "summary",
        "snippet",
        "score",
        "confidence",
        "updated",
    }
    assert hit["id"] == "rel00001"


def test_search_snippets_are_at_most_240_chars(mcp):
    save(mcp, "lighthouse " * 400)
    data = mcp.ok("memory_search", {"query": "lighthouse"})
    assert data["results"] and all(len(h["snippet"]) <= 240 for h in data["results"])


def test_search_without_vectors_says_degraded(mcp):
    assert mcp.ok("memory_search", {"query": "deploy"})["degraded"] is True


def test_search_honours_limit(mcp):
    for _ in range(3):
        save(mcp, "tidal calendar entry")
    assert len(mcp.ok("memory_search", {"query": "tidal", "limit": 2})["results"]) == 2


def test_search_filters_by_folder(mcp):
    data = mcp.ok("memory_search", {"query": "release", "folder": "Projects"})
    assert [h["path"] for h in data["results"]] == ["Projects/Alpha.md"]


def test_search_limit_over_50_is_invalid_input(mcp):
    reply = mcp.call("memory_search", {"query": "x", "limit": 51})
    assert reply.is_error
    assert reply.data == {
        "code": "INVALID_INPUT",
        "message": "limit must be in 1..50",
        "retryable": False,
    }


def test_saved_note_is_found_by_the_very_next_search(mcp):
    word = unique("zebra")
    saved = save(mcp, f"A note about {word} migrations.")
    hits = mcp.ok("memory_search", {"query": word})["results"]
    assert [h["id"] for h in hits] == [saved["id"]]


# ---- memory_list ----


def test_list_pages_with_a_cursor_without_repeats(mcp):
    first = mcp.ok("memory_list", {"limit": 2})
    assert len(first["notes"]) == 2 and first["next_cursor"]
    second = mcp.ok("memory_list", {"limit": 2, "cursor": first["next_cursor"]})
    assert {n["id"] for n in first["notes"]}.isdisjoint({n["id"] for n in second["notes"]})


def test_list_is_newest_first(mcp):
    saved = save(mcp, unique("fresh content "))
    assert mcp.ok("memory_list", {"limit": 1})["notes"][0]["id"] == saved["id"]


def test_list_entries_have_the_agreed_fields(mcp):
    note = mcp.ok("memory_list", {"limit": 1})["notes"][0]
    assert set(note) == {"id", "title", "path", "summary", "updated"}


def test_list_with_a_foreign_cursor_is_invalid_input(mcp):
    reply = mcp.call("memory_list", {"cursor": "not-a-cursor"})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


# ---- memory_get ----


def test_get_returns_the_whole_note_with_version_and_links(mcp):
    data = mcp.ok("memory_get", {"id": "rel00001"})
    assert set(data) == {
        "id", "title", "path", "summary", "tags", "aliases", "created", "updated",
        "version", "content", "links_out", "backlinks", "related",
    }  # fmt: skip
    assert data["tags"] == ["process", "release"]
    assert "Freeze the branch" in data["content"]
    assert data["links_out"] == [{"id": "dep00001", "title": "Deploy guide"}]
    assert {"id": mcp.ok("memory_get", {"id": "Projects/Alpha.md"})["id"], "title": "Alpha"} in (
        data["backlinks"]
    )


def test_get_accepts_a_vault_relative_path(mcp):
    assert mcp.ok("memory_get", {"id": "How-to/Deploy guide.md"})["id"] == "dep00001"


def test_get_with_max_chars_cuts_content_and_says_so(mcp):
    data = mcp.ok("memory_get", {"id": "rel00001", "max_chars": 10})
    assert len(data["content"]) == 10 and data["truncated"] is True


def test_get_unknown_id_is_not_found(mcp):
    reply = mcp.call("memory_get", {"id": "nosuch99"})
    assert reply.is_error and reply.data["code"] == "NOT_FOUND"
    assert reply.data["retryable"] is False


# ---- memory_save ----


def test_save_writes_a_markdown_file_with_frontmatter(mcp):
    saved = save(mcp, "Body text.", summary="One line.", tags=["demo"])
    text = (mcp.vault / saved["path"]).read_text(encoding="utf-8")
    assert text.startswith("---\n") and f"id: {saved['id']}" in text
    assert "summary: One line." in text and "Body text." in text


def test_save_into_a_folder(mcp):
    saved = save(mcp, "Filed away.", folder="Archive/2026")
    assert saved["path"].startswith("Archive/2026/")
    assert (mcp.vault / saved["path"]).is_file()


def test_save_never_overwrites_a_name_clash_gets_a_suffix(mcp):
    title = unique("Clash ")
    a = mcp.ok("memory_save", {"title": title, "content": unique("one ")})
    b = mcp.ok("memory_save", {"title": title, "content": unique("two ")})
    assert a["path"] != b["path"]
    assert (mcp.vault / a["path"]).is_file() and (mcp.vault / b["path"]).is_file()


def test_save_of_identical_content_returns_the_existing_note(mcp):
    content = unique("twice ")
    first = save(mcp, content)
    second = save(mcp, content)
    assert second["duplicate_of"] == first["id"] and second["path"] == first["path"]


def test_save_with_a_secret_is_invalid_input_and_writes_nothing(mcp):
    before = files_under(mcp.vault)
    reply = mcp.call(
        "memory_save",
        {"title": "Keys", "content": "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n"},
    )
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"
    assert files_under(mcp.vault) == before


def test_save_with_title_over_300_chars_is_invalid_input(mcp):
    reply = mcp.call("memory_save", {"title": "t" * 301, "content": "c"})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


def test_save_with_traversal_folder_is_forbidden_and_writes_nothing(mcp):
    outside = mcp.vault.parent
    before = files_under(outside)
    reply = mcp.call("memory_save", {"title": "Escape", "content": "x", "folder": "../evil"})
    assert reply.is_error and reply.data["code"] == "FORBIDDEN"
    assert files_under(outside) == before


def test_save_with_absolute_folder_is_forbidden(mcp, tmp_path):
    reply = mcp.call("memory_save", {"title": "Escape", "content": "x", "folder": str(tmp_path)})
    assert reply.is_error and reply.data["code"] == "FORBIDDEN"
    assert list(tmp_path.iterdir()) == []


def test_save_through_a_symlink_leading_out_of_the_vault_is_forbidden(mcp, tmp_path):
    link = mcp.vault / unique("link")
    os.symlink(tmp_path, link)
    try:
        reply = mcp.call("memory_save", {"title": "Escape", "content": "x", "folder": link.name})
    finally:
        link.unlink()
    assert reply.is_error and reply.data["code"] == "FORBIDDEN"
    assert list(tmp_path.iterdir()) == []


def test_save_into_the_trash_folder_is_forbidden(mcp):
    reply = mcp.call("memory_save", {"title": "Hide", "content": "x", "folder": ".trash"})
    assert reply.is_error and reply.data["code"] == "FORBIDDEN"


# ---- memory_update ----


def test_update_appends_and_returns_a_new_version(mcp):
    saved = save(mcp, "First line.")
    updated = mcp.ok(
        "memory_update", {"id": saved["id"], "version": saved["version"], "append": "Added."}
    )
    assert updated["id"] == saved["id"] and updated["version"] != saved["version"]
    text = (mcp.vault / saved["path"]).read_text(encoding="utf-8")
    assert text.rstrip().endswith("Added.") and "First line." in text


def test_update_replaces_content_and_the_next_search_finds_it(mcp):
    saved = save(mcp, "Old words.")
    word = unique("replaced")
    mcp.ok("memory_update", {"id": saved["id"], "version": saved["version"], "content": word})
    assert [h["id"] for h in mcp.ok("memory_search", {"query": word})["results"]] == [saved["id"]]


def test_update_keeps_frontmatter_keys_vault_brain_does_not_own(mcp):
    saved = save(mcp, "Body.")
    path = mcp.vault / saved["path"]
    path.write_text(
        path.read_text(encoding="utf-8").replace("---\n", "---\nowner: sam\npriority: 2\n", 1),
        encoding="utf-8",
    )
    version = mcp.ok("memory_get", {"id": saved["id"]})["version"]
    mcp.ok("memory_update", {"id": saved["id"], "version": version, "summary": "Changed."})
    text = path.read_text(encoding="utf-8")
    assert text.index("owner: sam") < text.index("priority: 2") < text.index("summary: Changed.")


def test_stale_version_is_conflict_with_current_version_and_file_untouched(mcp):
    saved = save(mcp, "Written by the model.")
    read = mcp.ok("memory_get", {"id": saved["id"]})
    path = mcp.vault / saved["path"]
    # Whole at once (temp file, then rename): an in-place write is truncate-then-write, and a
    # watcher that syncs in between (a loaded machine can pause this process there) indexes
    # an empty file for a moment; the version check, not that instant, is under test here.
    edit = path.with_name(".edit.tmp")
    edit.write_text(path.read_text(encoding="utf-8") + "\nEdited in Obsidian.\n", "utf-8")
    os.replace(edit, path)
    edited = path.read_bytes()
    reply = mcp.call(
        "memory_update", {"id": saved["id"], "version": read["version"], "append": "Model."}
    )
    assert reply.is_error and reply.data["code"] == "CONFLICT", reply.data
    assert reply.data["current_version"] not in ("", read["version"])
    assert path.read_bytes() == edited


def test_update_with_content_and_append_is_invalid_input(mcp):
    saved = save(mcp, "x y z")
    reply = mcp.call(
        "memory_update",
        {"id": saved["id"], "version": saved["version"], "content": "a", "append": "b"},
    )
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


def test_update_with_nothing_to_change_is_invalid_input(mcp):
    saved = save(mcp, "nothing changes")
    reply = mcp.call("memory_update", {"id": saved["id"], "version": saved["version"]})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


def test_update_of_unknown_note_is_not_found(mcp):
    reply = mcp.call("memory_update", {"id": "nosuch99", "version": "abc", "append": "x"})
    assert reply.is_error and reply.data["code"] == "NOT_FOUND"


# ---- memory_delete ----


def test_delete_moves_the_file_into_trash(mcp):
    saved = save(mcp, "Soon gone.", folder="Scratch")
    data = mcp.ok("memory_delete", {"id": saved["id"], "version": saved["version"]})
    assert data["id"] == saved["id"] and data["trashed_to"].startswith(".trash/Scratch/")
    assert (mcp.vault / data["trashed_to"]).is_file()
    assert not (mcp.vault / saved["path"]).exists()


def test_deleted_note_is_no_longer_found(mcp):
    word = unique("ephemeral")
    saved = save(mcp, word)
    mcp.ok("memory_delete", {"id": saved["id"], "version": saved["version"]})
    assert mcp.ok("memory_search", {"query": word})["results"] == []


def test_delete_with_stale_version_is_conflict_and_file_stays(mcp):
    saved = save(mcp, "Keep me.")
    reply = mcp.call("memory_delete", {"id": saved["id"], "version": "000000000000"})
    assert reply.is_error and reply.data["code"] == "CONFLICT"
    assert (mcp.vault / saved["path"]).is_file()


# ---- dispatch ----


def test_unknown_tool_is_invalid_input(mcp):
    reply = mcp.call("memory_forget", {})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


def test_unknown_argument_is_invalid_input(mcp):
    reply = mcp.call("memory_get", {"id": "rel00001", "verbose": True})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"


def test_vault_path_fixture_is_the_served_vault(mcp):
    assert Path(mcp.vault, "Inbox.md").is_file()


# ---- lookups a model will try (issue 10) ----


def test_get_by_title_alias_and_file_name_in_any_case(mcp):
    assert mcp.ok("memory_get", {"id": "release checklist"})["id"] == "rel00001"
    assert mcp.ok("memory_get", {"id": "DEPLOY GUIDE"})["id"] == "dep00001"
    assert mcp.ok("memory_get", {"id": "Alpha"})["path"] == "Projects/Alpha.md"
    assert mcp.ok("memory_get", {"id": "Alpha.md"})["path"] == "Projects/Alpha.md"


def test_get_of_nothing_suggests_close_titles_and_memory_search(mcp):
    reply = mcp.call("memory_get", {"id": "Releese checklst"})
    assert reply.is_error and reply.data["code"] == "NOT_FOUND"
    assert reply.data["suggestions"][0]["id"] == "rel00001"
    assert "memory_search" in reply.data["message"]


def test_search_and_list_in_a_folder_that_does_not_exist_say_so(mcp):
    for tool, args in (("memory_search", {"query": "release"}), ("memory_list", {})):
        reply = mcp.call(tool, {**args, "folder": "Projekts"})
        assert reply.is_error and reply.data["code"] == "NOT_FOUND"
        assert reply.data["folders"] == ["Projects"]


def test_folder_filter_is_case_insensitive(mcp):
    data = mcp.ok("memory_search", {"query": "release", "folder": "projects"})
    assert [h["path"] for h in data["results"]] == ["Projects/Alpha.md"]


def test_list_and_search_take_the_same_tags_argument(mcp):
    tag = unique("tag")
    saved = save(mcp, "kelp forest survey", tags=[tag, "marine"])
    listed = mcp.ok("memory_list", {"tags": [tag]})["notes"]
    found = mcp.ok("memory_search", {"query": "kelp", "tags": [tag, "marine"]})["results"]
    assert [n["id"] for n in listed] == [saved["id"]] == [h["id"] for h in found]
    assert mcp.ok("memory_list", {"tags": [tag, "no-such-tag"]})["notes"] == []  # AND


def test_since_and_until_take_dates_and_spans(mcp):
    word = unique("zephyr")
    saved = save(mcp, f"{word} weather log")
    recent = mcp.ok("memory_search", {"query": word, "since": "1d"})["results"]
    assert [h["id"] for h in recent] == [saved["id"]]
    assert mcp.ok("memory_search", {"query": word, "until": "2000-01-01"})["results"] == []
    listed = mcp.ok("memory_list", {"since": "24h", "limit": 100})["notes"]
    assert saved["id"] in [n["id"] for n in listed]
    bad = mcp.call("memory_list", {"since": "last tuesday"})
    assert bad.is_error and bad.data["code"] == "INVALID_INPUT"


def test_every_tool_argument_has_a_description(mcp):
    for tool in mcp.list_tools().tools:
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"


def test_conflict_carries_the_current_content_to_merge_into(mcp, tmp_path):
    saved = save(mcp, "first draft of the packing list")
    path = mcp.vault / saved["path"]
    path.write_text(path.read_text() + "\nAdded by hand: the red scarf.\n")
    reply = mcp.call(
        "memory_update",
        {"id": saved["id"], "version": saved["version"], "content": "model's rewrite"},
    )
    assert reply.is_error and reply.data["code"] == "CONFLICT"
    current = reply.data["current"]
    assert "the red scarf" in current["content"] and current["truncated"] is False
    assert "merge" in reply.data["message"]
    assert "model's rewrite" not in path.read_text()


# ---- writes that never surprise an Obsidian user (issue 10) ----


def test_save_with_its_own_frontmatter_writes_one_merged_block(mcp):
    content = "---\nsource: https://example.org\ntags: [reading]\nid: not-yours\n---\nThe body."
    saved = mcp.ok("memory_save", {"title": unique("Clipping "), "content": content})
    text = (mcp.vault / saved["path"]).read_text()
    assert text.count("---\n") == 2
    assert f"id: {saved['id']}\n" in text and "not-yours" not in text
    assert "source: https://example.org\n" in text and text.endswith("The body.\n")


def test_update_with_a_new_title_renames_the_file_and_keeps_the_id(mcp):
    saved = save(mcp, "notes about the ferry timetable")
    new_title = unique("Ferry times ")
    done = mcp.ok("memory_update", {"id": saved["id"], "version": saved["version"],
                                     "title": new_title})  # fmt: skip
    assert done["path"] == f"{new_title}.md" and done["id"] == saved["id"]
    assert not (mcp.vault / saved["path"]).exists()
    assert mcp.ok("memory_get", {"id": saved["id"]})["path"] == done["path"]


def test_appending_to_a_hand_written_note_adds_no_frontmatter(mcp):
    name = unique("Groceries ")
    path = mcp.vault / f"{name}.md"
    path.write_text("# Groceries\n\n- milk\n")
    found = search_until(mcp, name)
    read = mcp.ok("memory_get", {"id": found})
    mcp.ok("memory_update", {"id": read["id"], "version": read["version"], "append": "- eggs"})
    assert path.read_text() == "# Groceries\n\n- milk\n\n- eggs\n"


def search_until(mcp, name: str) -> str:
    """The id of the note called `name` once the server has seen the file."""
    reply = wait_until(
        lambda: (got := mcp.call("memory_get", {"id": name})) and not got.is_error and got,
        f"{name} indexed",
        every=0.1,
    )
    return reply.data["id"]
