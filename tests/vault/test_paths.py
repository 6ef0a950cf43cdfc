"""Invariant 3: nothing is written outside the vault. Paths from clients are checked here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vault_brain.errors import Forbidden, InvalidInput
from vault_brain.vault.paths import resolve_folder_path, resolve_note_path, safe_filename


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (root / "Projects" / "Alpha.md").write_text("# Alpha\n")
    return root


def test_plain_relative_path_resolves_inside_the_vault(vault: Path) -> None:
    assert resolve_note_path(vault, "Projects/Alpha.md") == vault / "Projects" / "Alpha.md"


def test_missing_md_suffix_is_appended(vault: Path) -> None:
    assert resolve_note_path(vault, "Projects/Beta") == vault / "Projects" / "Beta.md"


def test_non_markdown_suffix_gets_md_appended(vault: Path) -> None:
    assert resolve_note_path(vault, "notes.txt").name == "notes.txt.md"


def test_backslashes_are_read_as_folder_separators(vault: Path) -> None:
    assert resolve_note_path(vault, "Projects\\Alpha.md") == vault / "Projects" / "Alpha.md"


def test_dot_components_are_ignored(vault: Path) -> None:
    assert resolve_note_path(vault, "./Projects/./Alpha.md") == vault / "Projects" / "Alpha.md"


@pytest.mark.parametrize(
    "rel",
    [
        "../outside.md",
        "a/../../outside.md",
        "Projects/../Alpha.md",
        "..",
        "..\\outside.md",
        "Projects/..\\..\\outside.md",
    ],
)
def test_parent_components_are_forbidden(vault: Path, rel: str) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, rel)


@pytest.mark.parametrize(
    "rel", ["/etc/passwd", "/tmp/x.md", "C:/Windows/x.md", "c:notes.md", "\\\\server\\share\\x.md"]
)
def test_absolute_paths_and_drive_letters_are_forbidden(vault: Path, rel: str) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, rel)


def test_nul_character_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "Projects/Al\x00pha.md")


@pytest.mark.parametrize(
    "rel",
    [
        ".vault-brain/index.md",
        ".trash/Alpha.md",
        ".obsidian/workspace.md",
        ".git/HEAD.md",
        "Projects/.hidden/x.md",
        ".env",
    ],
)
def test_dot_folders_and_files_are_forbidden(vault: Path, rel: str) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, rel)


@pytest.mark.parametrize(
    "name", ["CON", "con.md", "PRN.md", "aux", "NUL.md", "COM1.md", "lpt9", "Com3.txt"]
)
def test_windows_reserved_names_are_forbidden(vault: Path, name: str) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, f"Projects/{name}")


def test_windows_reserved_folder_name_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "aux/note.md")


def test_names_merely_starting_like_reserved_names_are_allowed(vault: Path) -> None:
    assert resolve_note_path(vault, "Console.md").name == "Console.md"


@pytest.mark.parametrize("rel", ["", "   ", "/", "./."])
def test_empty_path_is_invalid(vault: Path, rel: str) -> None:
    with pytest.raises((InvalidInput, Forbidden)):
        resolve_note_path(vault, rel)


def test_empty_string_is_invalid_input(vault: Path) -> None:
    with pytest.raises(InvalidInput):
        resolve_note_path(vault, "")


def test_component_longer_than_255_bytes_is_invalid(vault: Path) -> None:
    with pytest.raises(InvalidInput):
        resolve_note_path(vault, "é" * 128 + ".md")


def test_control_characters_are_invalid(vault: Path) -> None:
    with pytest.raises(InvalidInput):
        resolve_note_path(vault, "Projects/a\nb.md")


def test_symlinked_folder_pointing_outside_is_forbidden(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "escape/new.md")


def test_symlinked_file_pointing_outside_is_forbidden(vault: Path, tmp_path: Path) -> None:
    target = tmp_path / "secret.md"
    target.write_text("outside")
    (vault / "link.md").symlink_to(target)
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "link.md")


def test_dangling_symlink_pointing_outside_is_forbidden(vault: Path, tmp_path: Path) -> None:
    (vault / "dangling.md").symlink_to(tmp_path / "not-yet.md")
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "dangling.md")


def test_symlink_into_a_dot_folder_is_forbidden(vault: Path) -> None:
    (vault / ".obsidian").mkdir()
    (vault / "config").symlink_to(vault / ".obsidian", target_is_directory=True)
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "config/app.md")


def test_symlink_to_a_folder_inside_the_vault_resolves_to_the_real_folder(vault: Path) -> None:
    (vault / "P").symlink_to(vault / "Projects", target_is_directory=True)
    assert resolve_note_path(vault, "P/Alpha.md") == vault / "Projects" / "Alpha.md"


def test_vault_root_reached_through_a_symlink_keeps_the_callers_prefix(
    vault: Path, tmp_path: Path
) -> None:
    link = tmp_path / "vault-link"
    link.symlink_to(vault, target_is_directory=True)
    assert resolve_note_path(link, "Projects/Alpha.md") == link / "Projects" / "Alpha.md"


def test_missing_folders_below_the_vault_are_allowed(vault: Path) -> None:
    assert resolve_note_path(vault, "New/Deep/Note.md") == vault / "New" / "Deep" / "Note.md"


def test_path_outside_allowed_folders_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "Projects/Alpha.md", allowed_folders=["Inbox"])


def test_path_inside_an_allowed_folder_is_accepted(vault: Path) -> None:
    path = resolve_note_path(vault, "Inbox/sub/n.md", allowed_folders=["Archive", "Inbox/"])
    assert path == vault / "Inbox" / "sub" / "n.md"


def test_allowed_folder_prefix_must_match_whole_components(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "Inboxes/n.md", allowed_folders=["Inbox"])


def test_symlink_inside_an_allowed_folder_cannot_reach_other_folders(vault: Path) -> None:
    (vault / "Inbox").mkdir()
    (vault / "Inbox" / "p").symlink_to(vault / "Projects", target_is_directory=True)
    with pytest.raises(Forbidden):
        resolve_note_path(vault, "Inbox/p/Alpha.md", allowed_folders=["Inbox"])


def test_vault_root_folder_is_refused_when_writes_are_limited(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_folder_path(vault, "", allowed_folders=["Inbox"])


def test_empty_folder_means_the_vault_root(vault: Path) -> None:
    assert resolve_folder_path(vault, "") == vault


def test_folder_traversal_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        resolve_folder_path(vault, "Projects/../..")


def test_nothing_is_created_by_resolving(vault: Path) -> None:
    before = sorted(os.walk(vault))
    resolve_note_path(vault, "New/Deep/Note.md")
    assert sorted(os.walk(vault)) == before


# --- safe_filename ------------------------------------------------------------------------


def test_plain_title_becomes_its_file_name() -> None:
    assert safe_filename("Release checklist") == "Release checklist.md"


def test_characters_obsidian_forbids_are_removed() -> None:
    name = safe_filename('a\\b/c:d*e?f"g<h>i|j#k^l[m]n')
    assert not set(name.removesuffix(".md")) & set('\\/:*?"<>|#^[]')


def test_slashes_read_as_dashes() -> None:
    assert safe_filename("2024/05/01 standup") == "2024-05-01 standup.md"


def test_whitespace_and_control_characters_collapse_to_single_spaces() -> None:
    assert safe_filename("  Meeting:\t notes\n\x07 today ") == "Meeting notes today.md"


def test_leading_and_trailing_dots_are_trimmed() -> None:
    assert safe_filename("..hidden thoughts...") == "hidden thoughts.md"


@pytest.mark.parametrize("title", ["", "   ", "...", "\n\t ", "#?*"])
def test_empty_titles_become_untitled(title: str) -> None:
    assert safe_filename(title) == "Untitled.md"


def test_unicode_titles_stay_readable() -> None:
    assert safe_filename("会议记录：第一季度") == "会议记录：第一季度.md"
    assert safe_filename("Заметки о встрече") == "Заметки о встрече.md"


def test_long_titles_are_capped_without_cutting_a_character() -> None:
    name = safe_filename("会" * 500)
    stem = name.removesuffix(".md")
    assert len(stem) <= 120
    assert len(name.encode("utf-8")) <= 255 - len(" 9999")
    assert set(stem) == {"会"}


def test_reserved_title_gets_a_name_windows_accepts(tmp_path: Path) -> None:
    name = safe_filename("CON")
    assert name != "CON.md"
    resolve_note_path(tmp_path, name)


def test_title_ending_in_md_is_not_doubled() -> None:
    assert safe_filename("README.md") == "README.md"


def test_every_safe_filename_is_an_accepted_path(tmp_path: Path) -> None:
    for title in ["a/../b", ".git", "..", "x" * 400, "NUL.txt", "tab\there", "é" * 300]:
        name = safe_filename(title)
        assert resolve_note_path(tmp_path, name).name == name
