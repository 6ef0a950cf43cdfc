"""Lookups by what a model remembers: paths, ids, titles, aliases, file names, and the id a
note had before a person renamed it in Obsidian."""

from __future__ import annotations

import os

import pytest

from vault_brain.errors import InvalidInput, NotFound


def test_a_renamed_note_keeps_its_old_derived_id_working(brain, vault):
    vault.write("Inbox/Trip ideas.md", "# Trip ideas\n\nKyoto in spring.\n")
    brain.sync()
    old_id = brain.get("Inbox/Trip ideas.md").id
    os.rename(vault.root / "Inbox/Trip ideas.md", vault.root / "Inbox/Travel.md")
    brain.sync()
    view = brain.get(old_id)
    assert view.path == "Inbox/Travel.md"
    assert view.id != old_id  # the note's id is derived from its new path


def test_renamed_twice_still_resolves(brain, vault):
    vault.write("A.md", "# A\n\nsame words\n")
    brain.sync()
    first = brain.get("A.md").id
    os.rename(vault.root / "A.md", vault.root / "B.md")
    brain.sync()
    os.rename(vault.root / "B.md", vault.root / "C.md")
    brain.sync()
    assert brain.get(first).path == "C.md"


def test_an_edited_and_renamed_note_gets_no_redirect(brain, vault):
    vault.write("A.md", "# A\n\nsome words\n")
    brain.sync()
    old_id = brain.get("A.md").id
    os.remove(vault.root / "A.md")
    vault.write("B.md", "# A\n\nother words\n")
    brain.sync()
    with pytest.raises(NotFound):
        brain.get(old_id)


def test_title_lookup_prefers_the_shortest_path(brain, vault):
    vault.write("Deep/Down/Plan.md", "---\ntitle: Plan\n---\nnested\n")
    vault.write("Plan.md", "# Plan\n\ntop\n")
    brain.sync()
    assert brain.get("plan").path == "Plan.md"


# ---- a name two notes share is ambiguous (issue 25, item 8) ----
# Returning one of them silently lets a model read, update or delete the wrong note.


def candidates(err: pytest.ExceptionInfo) -> set[tuple[str, str, str]]:
    return {(c["id"], c["title"], c["path"]) for c in err.value.details["candidates"]}


def test_a_title_two_notes_share_is_ambiguous_and_names_both(brain, vault):
    vault.write("Work/Ideas.md", "---\nid: work0001\n---\n# Ideas\n\nfor work\n")
    vault.write("Home/Ideas.md", "---\nid: home0001\n---\n# Ideas\n\nfor home\n")
    brain.sync()
    with pytest.raises(InvalidInput) as err:
        brain.get("ideas")
    assert candidates(err) == {
        ("work0001", "Ideas", "Work/Ideas.md"),
        ("home0001", "Ideas", "Home/Ideas.md"),
    }
    assert "Work/Ideas.md" in err.value.message and "home0001" in err.value.message
    assert brain.get("Work/Ideas.md").id == "work0001"  # a path or an id still says which


def test_an_alias_two_notes_share_is_ambiguous(brain, vault):
    vault.write("A.md", "---\nid: aaaa0001\naliases: [ship list]\n---\n# Release steps\n\na\n")
    vault.write("B.md", "---\nid: bbbb0001\naliases: [Ship List]\n---\n# Launch plan\n\nb\n")
    brain.sync()
    with pytest.raises(InvalidInput) as err:
        brain.get("ship list")
    assert {c[0] for c in candidates(err)} == {"aaaa0001", "bbbb0001"}


def test_a_file_name_in_two_folders_is_ambiguous(brain, vault):
    vault.write("2025/Review.md", "---\ntitle: Review of 2025\n---\nold\n")
    vault.write("2026/Review.md", "---\ntitle: Review of 2026\n---\nnew\n")
    brain.sync()
    with pytest.raises(InvalidInput) as err:
        brain.get("Review")
    assert {c[2] for c in candidates(err)} == {"2025/Review.md", "2026/Review.md"}


def test_an_update_or_delete_by_an_ambiguous_title_touches_nothing(brain, vault):
    vault.write("Work/Ideas.md", "# Ideas\n\nfor work\n")
    vault.write("Home/Ideas.md", "# Ideas\n\nfor home\n")
    brain.sync()
    version = brain.get("Work/Ideas.md").version
    with pytest.raises(InvalidInput):
        brain.update("Ideas", version, append="more")
    with pytest.raises(InvalidInput):
        brain.delete("Ideas", version)
    assert vault.read("Work/Ideas.md") == "# Ideas\n\nfor work\n"
    assert vault.read("Home/Ideas.md") == "# Ideas\n\nfor home\n"
