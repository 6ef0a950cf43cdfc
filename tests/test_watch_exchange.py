"""The watcher and the writer's exchange: a replace swaps the note with an entry in the
history folder; the index must still hold the new note (and nothing from the history)."""

from __future__ import annotations

from test_watch import fresh_snapshot, fts_paths, running, vault, write  # noqa: F401

from tests.settle import settle
from vault_brain.vault import history
from vault_brain.vault.note import file_version
from vault_brain.vault.writer import replace_note_file


def test_replaced_notes_are_indexed_as_a_full_reindex_would(running, vault, tmp_path):  # noqa: F811
    _, brain = running
    path = vault / "Inbox.md"
    for i in range(20):
        raw = path.read_bytes()
        replace_note_file(vault, "Inbox.md", file_version(raw), raw + f"capybara{i}\n".encode())
    write(vault, "Other.md", "# Other\nplain\n")
    settle(brain)
    assert fts_paths(brain, "capybara19") == ["Inbox.md"]
    assert len(history.list_versions(vault, "Inbox.md")) == 20
    assert brain.snapshot() == fresh_snapshot(vault, tmp_path)
    assert fts_paths(brain, "capybara0") == ["Inbox.md"]  # the 20 kept versions are not notes
