"""Lookups by what a model remembers: paths, ids, titles, aliases, file names, and the id a
note had before a person renamed it in Obsidian."""

from __future__ import annotations

import os

import pytest

from vault_brain.errors import NotFound


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
