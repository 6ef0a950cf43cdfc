"""The stat pass: which Markdown files a vault holds, robust to what a filesystem throws."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vault_brain.errors import NotFound
from vault_brain.vault.scan import FileStat, is_ignored, is_markdown, scan_vault


def write(root: Path, rel: str, text: str = "note\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def paths(result) -> list[str]:
    return [f.path for f in result.files]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


# --- what is listed ---------------------------------------------------------------------


def test_only_markdown_files_are_listed_any_case(vault):
    for rel in ("a.md", "B.MD", "c.Md", "d.txt", "e.md.bak", "img.png", "canvas.canvas"):
        write(vault, rel)
    assert paths(scan_vault(vault)) == ["B.MD", "a.md", "c.Md"]


def test_files_are_sorted_by_path_with_their_stat(vault):
    write(vault, "z/last.md", "12345")
    first = write(vault, "a/first.md", "1")
    os.utime(first, ns=(1_700_000_000_000_000_000, 1_700_000_000_123_456_789))
    result = scan_vault(vault)
    assert result.files == [
        FileStat("a/first.md", 1_700_000_000_123_456_789, 1),
        FileStat("z/last.md", (vault / "z/last.md").stat().st_mtime_ns, 5),
    ]


def test_dot_folders_and_dot_files_are_ignored(vault):
    for rel in (".obsidian/w.md", ".trash/old.md", ".git/x.md", ".vault-brain/i.md", ".hidden.md"):
        write(vault, rel)
    write(vault, "Notes/.draft.md")
    write(vault, "Notes/kept.md")
    assert paths(scan_vault(vault)) == ["Notes/kept.md"]


def test_code_repo_folder_names_are_not_ignored(vault):
    for rel in ("build/a.md", "dist/b.md", "node_modules/c.md", "venv/d.md"):
        write(vault, rel)
    assert len(scan_vault(vault).files) == 4


def test_glob_matching_a_folder_name_excludes_the_folder(vault):
    write(vault, "Archive/old.md")
    write(vault, "Projects/Archive/older.md")
    write(vault, "Projects/live.md")
    assert paths(scan_vault(vault, ["Archive"])) == ["Projects/live.md"]


def test_glob_with_trailing_slash_excludes_folders_only(vault):
    write(vault, "tmp/a.md")
    write(vault, "tmp.md")
    assert paths(scan_vault(vault, ["tmp/", "tmp.md/"])) == ["tmp.md"]


def test_glob_with_a_slash_matches_vault_paths(vault):
    write(vault, "Projects/Old/a.md")
    write(vault, "Other/Old/b.md")
    write(vault, "Projects/x.draft.md")
    assert paths(scan_vault(vault, ["Projects/Old", "*.draft.md"])) == ["Other/Old/b.md"]


def test_subfolder_scan_matches_globs_against_vault_paths(vault):
    write(vault, "Projects/Old/a.md")
    write(vault, "Projects/new.md")
    result = scan_vault(vault / "Projects", ["Projects/Old"], under="Projects")
    assert paths(result) == ["new.md"]


@pytest.mark.parametrize(
    "rel,ignore,expected",
    [
        ("Notes/a.md", (), False),
        (".obsidian/app.json", (), True),
        ("Notes/.trash/a.md", (), True),
        (".vault-brain/", (), True),
        ("Templates/daily.md", ("Templates",), True),
        ("Templates/", ("Templates/",), True),
        ("Templates.md", ("Templates/",), False),
        ("a/b/c.md", ("a/b",), True),
        ("x/a/b.md", ("a/b",), False),
        ("x/a/b.md", ("/x",), True),
        ("y/x/b.md", ("/x",), False),
        ("Daily/2024-01-01.md", ("Daily/2024-*",), True),
        ("Notes/a.excalidraw.md", ("*.excalidraw.md",), True),
    ],
)
def test_is_ignored_follows_the_scanner_rule(rel, ignore, expected):
    assert is_ignored(rel, ignore) is expected


def test_is_markdown_ignores_case():
    assert is_markdown("A.MD") and not is_markdown("a.markdown.bak")


# --- bad input --------------------------------------------------------------------------


def test_oversize_file_is_skipped_with_reason(vault):
    write(vault, "big.md", "x" * 2_001)
    write(vault, "small.md", "x" * 2_000)
    result = scan_vault(vault, max_file_bytes=2_000)
    assert paths(result) == ["small.md"]
    assert result.skipped == [("big.md", "too large: 2001 bytes > 2000")]


def test_symlink_loop_to_parent_is_skipped(vault):
    write(vault, "a/n.md")
    os.symlink(vault, vault / "a" / "up")
    result = scan_vault(vault)
    assert paths(result) == ["a/n.md"]
    assert result.skipped == [("a/up", "symlink loop or folder already scanned")]


def test_symlinked_folder_outside_the_vault_is_skipped_with_reason(vault, tmp_path):
    outside = tmp_path / "elsewhere"
    write(outside, "shared.md")
    os.symlink(outside, vault / "ext")
    result = scan_vault(vault)
    assert paths(result) == []
    assert result.skipped == [("ext", "symlink leads outside the vault")]


def test_symlinked_folder_outside_the_vault_is_followed_when_trusted(vault, tmp_path):
    outside = tmp_path / "elsewhere"
    write(outside, "shared.md")
    os.symlink(outside, vault / "ext")
    assert paths(scan_vault(vault, follow_outside=[str(outside)])) == ["ext/shared.md"]


def test_loop_inside_a_symlinked_folder_is_skipped(vault, tmp_path):
    outside = tmp_path / "elsewhere"
    write(outside, "sub/shared.md")
    os.symlink(outside, outside / "sub" / "again")
    os.symlink(outside, vault / "ext")
    result = scan_vault(vault, follow_outside=[str(outside)])
    assert paths(result) == ["ext/sub/shared.md"]
    assert [p for p, _ in result.skipped] == ["ext/sub/again"]


def test_symlink_into_the_vault_does_not_duplicate_notes(vault):
    write(vault, "Z-real/n.md")
    os.symlink(vault / "Z-real", vault / "A-alias")
    result = scan_vault(vault)
    assert paths(result) == ["Z-real/n.md"]
    assert result.skipped == [("A-alias", "symlink loop or folder already scanned")]


def test_symlinked_file_uses_the_target_stat(vault, tmp_path):
    target = write(tmp_path / "elsewhere", "t.md", "0123456789")
    os.utime(target, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_042))
    os.symlink(target, vault / "linked.md")
    assert scan_vault(vault, follow_outside=[str(target.parent)]).files == [
        FileStat("linked.md", 1_600_000_000_000_000_042, 10)
    ]


# --- symlinks that lead out of the vault (issue 11, item 9) -----------------------------


def test_a_note_linked_to_a_key_outside_the_vault_is_skipped(vault, tmp_path):
    key = write(tmp_path / "outside" / "home" / ".ssh", "id_rsa", "-----BEGIN KEY-----\n")
    os.symlink(os.path.relpath(key, vault), vault / "Setup notes.md")
    write(vault, "ok.md")
    result = scan_vault(vault)
    assert paths(result) == ["ok.md"]
    assert result.skipped == [("Setup notes.md", "symlink leads outside the vault")]


def test_a_note_linked_to_markdown_outside_the_vault_is_skipped(vault, tmp_path):
    outside = write(tmp_path / "outside", "diary.md")
    os.symlink(outside, vault / "Diary.md")
    assert scan_vault(vault).skipped == [("Diary.md", "symlink leads outside the vault")]


def test_a_note_linked_to_a_file_that_is_not_markdown_is_skipped_even_inside(vault):
    write(vault, "keys/deploy.pem", "secret")
    os.symlink(vault / "keys" / "deploy.pem", vault / "Deploy.md")
    assert scan_vault(vault).skipped == [
        ("Deploy.md", "symlink leads to a file that is not Markdown")
    ]


def test_a_trusted_folder_still_gives_no_file_that_is_not_markdown(vault, tmp_path):
    key = write(tmp_path / "outside", "id_rsa", "secret")
    os.symlink(key, vault / "Key.md")
    result = scan_vault(vault, follow_outside=[str(tmp_path / "outside")])
    assert result.skipped == [("Key.md", "symlink leads to a file that is not Markdown")]


def test_links_into_hidden_folders_of_the_vault_are_skipped(vault):
    write(vault, ".git/notes.md")
    write(vault, ".trash/old.md")
    os.symlink(vault / ".git", vault / "Repo")
    os.symlink(vault / ".trash" / "old.md", vault / "Old.md")
    result = scan_vault(vault)
    assert paths(result) == []
    assert result.skipped == [
        ("Old.md", "symlink leads into a hidden folder"),
        ("Repo", "symlink leads into a hidden folder"),
    ]


def test_a_note_linked_to_another_note_inside_the_vault_is_followed(vault):
    write(vault, "Real/Note.md")
    os.symlink(vault / "Real" / "Note.md", vault / "Alias.md")
    assert paths(scan_vault(vault)) == ["Alias.md", "Real/Note.md"]


def test_a_subfolder_scan_through_a_link_out_of_the_vault_finds_nothing(vault, tmp_path):
    write(tmp_path / "outside", "leak.md")
    os.symlink(tmp_path / "outside", vault / "ext")
    result = scan_vault(vault / "ext", under="ext")
    assert paths(result) == []
    assert result.skipped == [("", "symlink leads outside the vault")]


# --- names that are not UTF-8 (item 14) -------------------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="Windows file names are always Unicode")
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(vault):
    write(vault, "a.md")
    with open(os.path.join(os.fsencode(vault), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"# Caf\xc3\xa9\n")
    os.mkdir(os.path.join(os.fsencode(vault), b"dir\xff"))
    with open(os.path.join(os.fsencode(vault), b"dir\xff", b"n.md"), "wb") as fh:
        fh.write(b"x")
    result = scan_vault(vault)
    assert paths(result) == ["a.md"]
    assert result.skipped == [
        ("caf\ufffd.md", "file name is not valid UTF-8"),
        ("dir\ufffd", "file name is not valid UTF-8"),
    ]


def test_dangling_symlink_is_skipped_with_reason(vault, tmp_path):
    os.symlink(tmp_path / "missing.md", vault / "gone.md")
    write(vault, "ok.md")
    result = scan_vault(vault)
    assert paths(result) == ["ok.md"]
    assert result.skipped == [("gone.md", "symlink target missing")]


def test_symlink_chain_loop_on_a_file_is_skipped(vault):
    os.symlink(vault / "b.md", vault / "a.md")
    os.symlink(vault / "a.md", vault / "b.md")
    result = scan_vault(vault)
    assert result.files == []
    assert [p for p, _ in result.skipped] == ["a.md", "b.md"]


def test_unreadable_folder_is_reported_not_emptied(vault):
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root from listing a folder")
    write(vault, "locked/secret.md")
    write(vault, "open.md")
    os.chmod(vault / "locked", 0)
    try:
        result = scan_vault(vault)
    finally:
        os.chmod(vault / "locked", 0o755)
    assert paths(result) == ["open.md"]
    assert result.unreadable_dirs == ["locked"]


def test_folder_whose_path_is_too_long_to_list_is_reported(vault):
    """Works as root too: the OS refuses to list a path longer than PATH_MAX."""
    write(vault, "deep/top.md")
    name = "d" * 200
    fd = os.open(vault / "deep", os.O_RDONLY | os.O_DIRECTORY)
    depth = 0
    try:
        while len(str(vault / "deep")) + depth * (len(name) + 1) < 5_000:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
            depth += 1
        note = os.open("lost.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.close(note)
    finally:
        os.close(fd)
    result = scan_vault(vault)
    assert paths(result) == ["deep/top.md"]
    assert len(result.unreadable_dirs) == 1
    assert result.unreadable_dirs[0].startswith("deep/" + name)


def test_missing_vault_raises_not_found(tmp_path):
    with pytest.raises(NotFound):
        scan_vault(tmp_path / "nope")


def test_vault_that_is_a_file_raises_not_found(tmp_path):
    write(tmp_path, "file.md")
    with pytest.raises(NotFound):
        scan_vault(tmp_path / "file.md")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_scan_leaves_no_descriptor_open(vault):
    """Folders may be listed through a descriptor (each file then stat'ed by name, relative
    to it): every one is closed again, on errors too."""
    for rel in ("a/x.md", "a/b/y.md", "c/z.md"):
        write(vault, rel)
    os.symlink(vault / "a", vault / "link")
    os.symlink(vault / "missing", vault / "dangling")
    before = sorted(os.listdir("/proc/self/fd"))
    result = scan_vault(vault)
    assert paths(result) == ["a/b/y.md", "a/x.md", "c/z.md"]
    scan_vault(vault / "a", under="a")
    with pytest.raises(NotFound):
        scan_vault(vault / "gone")
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_file_edited_in_place_is_seen_with_its_new_stat(vault):
    """An edit in place does not move its folder's mtime: each file's own stat is read."""
    path = write(vault, "deep/er/note.md", "one")
    folder_mtime = (vault / "deep" / "er").stat().st_mtime_ns
    first = scan_vault(vault).files
    with open(path, "a", encoding="utf-8") as f:
        f.write(" two")
    os.utime(path, ns=(1_800_000_000_000_000_000, 1_800_000_000_000_000_001))
    os.utime(vault / "deep" / "er", ns=(folder_mtime, folder_mtime))
    assert scan_vault(vault).files == [FileStat("deep/er/note.md", 1_800_000_000_000_000_001, 7)]
    assert first[0].size == 3
