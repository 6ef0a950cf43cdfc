"""Nothing is read outside the vault: symlinks lead only inside it (or into a folder the
owner trusts), and only to Markdown files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.waiting import HANG_SECONDS
from vault_brain.errors import Forbidden, InvalidInput, NotFound
from vault_brain.vault.reading import read_note_bytes

KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A vault inside a cloned repo next to a home folder with a key, as an attacker
    would lay it out: `Setup notes.md -> ../../outside/home/.ssh/id_rsa`."""
    root = tmp_path / "repo" / "vault"
    (root / "Real").mkdir(parents=True)
    (root / "Real" / "Note.md").write_bytes(b"# Note\n")
    ssh = tmp_path / "outside" / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_rsa").write_bytes(KEY)
    (tmp_path / "outside" / "shared.md").write_bytes(b"# Shared\n")
    os.symlink("../../outside/home/.ssh/id_rsa", root / "Setup notes.md")
    return root, tmp_path / "outside"


def test_a_note_inside_the_vault_is_read(layout) -> None:
    root, _ = layout
    assert read_note_bytes(root, "Real/Note.md") == b"# Note\n"


def test_a_link_inside_the_vault_to_a_note_is_read(layout) -> None:
    root, _ = layout
    os.symlink(root / "Real" / "Note.md", root / "Alias.md")
    assert read_note_bytes(root, "Alias.md") == b"# Note\n"


def test_a_link_to_a_key_outside_the_vault_is_forbidden(layout) -> None:
    root, _ = layout
    with pytest.raises(Forbidden):
        read_note_bytes(root, "Setup notes.md")


def test_a_key_stays_forbidden_even_in_a_trusted_folder(layout) -> None:
    root, outside = layout
    with pytest.raises(Forbidden):
        read_note_bytes(root, "Setup notes.md", trusted=[outside])


def test_markdown_in_a_trusted_folder_is_read_and_elsewhere_is_not(layout) -> None:
    root, outside = layout
    os.symlink(outside / "shared.md", root / "Shared.md")
    with pytest.raises(Forbidden):
        read_note_bytes(root, "Shared.md")
    assert read_note_bytes(root, "Shared.md", trusted=[str(outside)]) == b"# Shared\n"


def test_a_linked_folder_leading_outside_is_forbidden(layout) -> None:
    root, outside = layout
    os.symlink(outside, root / "ext")
    with pytest.raises(Forbidden):
        read_note_bytes(root, "ext/shared.md")


@pytest.mark.parametrize("rel", ["../outside/shared.md", "/etc/passwd", ".trash/x.md", ""])
def test_paths_that_climb_hide_or_are_absolute_are_refused(layout, rel: str) -> None:
    root, _ = layout
    with pytest.raises((Forbidden, InvalidInput)):
        read_note_bytes(root, rel)


def test_a_name_that_is_not_utf8_is_invalid_input(layout) -> None:
    root, _ = layout
    with pytest.raises(InvalidInput):
        read_note_bytes(root, "caf\udce9.md")


def test_a_missing_note_is_file_not_found(layout) -> None:
    root, _ = layout
    with pytest.raises(FileNotFoundError):
        read_note_bytes(root, "Real/Gone.md")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_a_note_is_refused_without_hanging(layout) -> None:
    root, _ = layout
    os.mkfifo(root / "Pipe.md")
    outcome: list[type] = []
    thread = threading.Thread(
        target=lambda: outcome.append(_error_of(lambda: read_note_bytes(root, "Pipe.md"))),
        daemon=True,
    )
    thread.start()
    thread.join(HANG_SECONDS)
    assert not thread.is_alive(), "reading a FIFO hung"
    assert outcome == [Forbidden]


def _error_of(fn) -> type | None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test reports which
        return type(exc)
    return None


# --- through the index: nothing outside the vault is searchable or readable ----------------


def test_a_key_linked_into_the_vault_is_never_indexed_nor_returned(vault, make_brain) -> None:
    outside = vault.root.parent / "outside" / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "id_rsa").write_bytes(KEY)
    os.symlink("../outside/home/.ssh/id_rsa", vault.root / "Setup notes.md")
    vault.write("Ok.md", "# Ok\n\nAn ordinary note.\n")
    brain = make_brain()
    brain.sync_paths(["Setup notes.md"])  # what the watcher does on a new file
    assert [h.path for h in brain.search("b3BlbnNzaC1rZXktdjEAAAAA", mode="fts").hits] == []
    with pytest.raises(NotFound):
        brain.get("Setup notes.md")


def test_a_folder_the_owner_trusts_is_indexed_through_its_link(vault, make_brain) -> None:
    outside = vault.root.parent / "work-notes"
    outside.mkdir()
    (outside / "Plan.md").write_text("# Plan\n\nThe quarterly wombat plan.\n", encoding="utf-8")
    os.symlink(outside, vault.root / "Work")
    assert [h.path for h in make_brain().search("wombat", mode="fts").hits] == []
    trusting = make_brain(vault={"follow_outside": [str(outside)]})
    assert [h.path for h in trusting.search("wombat", mode="fts").hits] == ["Work/Plan.md"]
    assert "quarterly wombat" in trusting.get("Work/Plan.md").content


def test_one_reader_reads_many_notes_as_read_note_bytes_does(layout) -> None:
    """NoteReader resolves the vault once; each note's own path is still checked."""
    from vault_brain.vault.reading import NoteReader

    root, outside = layout
    os.symlink(outside / "shared.md", root / "Shared.md")
    reader = NoteReader(root, [outside])
    assert reader.read("Real/Note.md") == read_note_bytes(root, "Real/Note.md")
    assert reader.read("Shared.md") == b"# Shared\n"
    with pytest.raises(Forbidden):
        reader.read("Setup notes.md")
    with pytest.raises(Forbidden):
        reader.read("../outside/shared.md")
    # A link made after the reader: still resolved and refused at its read.
    os.symlink("../../outside/home/.ssh/id_rsa", root / "Real" / "Later.md")
    with pytest.raises(Forbidden):
        reader.read("Real/Later.md")


@pytest.mark.parametrize(
    ("base", "path"),
    [
        ("/v", "/v"),
        ("/v", "/v/a.md"),
        ("/v", "/v/.hidden/a.md"),
        ("/v", "/va/a.md"),
        ("/v", "/"),
        ("/v/w", "/v"),
        ("/", "/a/b.md"),
        ("/", "/"),
        ("//v", "//v/a.md"),
        ("/v", "/v/a/.b/c.md"),
        ("/v", "/v.md"),
    ],
)
def test_the_prefix_test_answers_as_commonpath_and_relpath(base: str, path: str) -> None:
    from vault_brain.vault.reading import _rel_parts, _relative, _within

    rel = _relative(base, path)
    if not _within(base, path):
        assert rel is None
        return
    old = os.path.relpath(path, base)
    assert rel == ("" if old == "." else old)
    if rel:
        assert tuple(_rel_parts(rel)) == Path(old).parts
