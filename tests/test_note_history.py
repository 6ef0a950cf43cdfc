"""A note's kept versions through the Brain, as `vault-brain history` and `restore` use them:
they follow the note when a model renames it, a restore never makes a second file with a
note's id, and a deleted note's history is there by its path (issue 25, items 9 and 14)."""

from __future__ import annotations

from pathlib import Path

from vault_brain.vault.note import parse_note


def notes_with_id(root: Path, note_id: str) -> list[str]:
    """Vault paths of the notes (outside .trash and the index folder) that carry this id."""
    out = []
    for path in root.rglob("*.md"):
        rel = path.relative_to(root)
        if rel.parts[0] in (".trash", ".vault-brain"):
            continue
        if parse_note(rel.as_posix(), path.read_bytes()).id == note_id:
            out.append(rel.as_posix())
    return sorted(out)


def test_history_follows_a_note_a_model_renamed(brain, vault):
    saved = brain.save("Trip plan", "first draft")
    first = brain.update(saved.id, saved.version, content="second draft")
    renamed = brain.update(saved.id, first.version, title="Kyoto trip")
    assert renamed.path == "Kyoto trip.md"
    for ref in (saved.id, "Kyoto trip.md"):
        path, versions = brain.history(ref)
        assert path == "Kyoto trip.md"
        assert [v.version for v in versions] == [first.version, saved.version]


def test_restoring_a_version_from_before_a_rename_puts_it_back_on_the_renamed_note(brain, vault):
    saved = brain.save("Trip plan", "first draft")
    renamed = brain.update(saved.id, saved.version, title="Kyoto trip", content="new text")
    _, versions = brain.history(saved.id)
    result = brain.restore(saved.id, versions[-1].name, version=renamed.version)
    assert result.path == "Kyoto trip.md" and result.id == saved.id
    assert "first draft" in vault.read("Kyoto trip.md")
    assert notes_with_id(vault.root, saved.id) == ["Kyoto trip.md"]


def test_a_version_kept_under_a_notes_old_path_is_restored_onto_the_note_not_beside_it(
    brain, vault
):
    """A person renamed the note in Obsidian: its versions stay under the old path, and a
    restore by that path used to write a second file with the note's id."""
    saved = brain.save("Trip plan", "first draft")
    brain.update(saved.id, saved.version, content="second draft")
    (vault.root / "Trip plan.md").rename(vault.root / "Kyoto trip.md")
    brain.sync()
    path, versions = brain.history("Trip plan.md")
    assert path == "Trip plan.md" and versions
    result = brain.restore("Trip plan.md", versions[0].name)
    assert result.path == "Kyoto trip.md" and result.id == saved.id
    assert notes_with_id(vault.root, saved.id) == ["Kyoto trip.md"]
    assert "first draft" in vault.read("Kyoto trip.md")


def test_a_deleted_note_that_was_never_updated_has_its_history_by_path(brain, vault):
    saved = brain.save("Packing list", "passport, chargers")
    brain.delete(saved.id, saved.version)
    path, versions = brain.history("Packing list.md")
    assert path == "Packing list.md"
    assert [v.version for v in versions] == [saved.version]
    result = brain.restore("Packing list.md", versions[0].name)
    assert result.path == "Packing list.md" and result.id == saved.id
    assert "passport, chargers" in vault.read("Packing list.md")
    assert notes_with_id(vault.root, saved.id) == ["Packing list.md"]
