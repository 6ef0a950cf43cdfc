"""The C read of a note (vault_brain/native/_readnote.c) against NoteReader's Python: where
the C answers, the same bytes; everything else (symlinks, names that are not Markdown,
FIFOs, folders, missing files) it leaves to the Python, which gives its usual answer.
Skipped where the extension was not built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault.reading import NoteReader, _parts

native = pytest.importorskip(
    "vault_brain.native._readnote", reason="the C extension is not built (pip install -e .)"
)


def _outcome(fn) -> bytes | type:  # noqa: ANN001
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the test compares which
        return type(exc)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.md").write_bytes(b"# deep\n")
    (root / "Note.md").write_bytes(b"x" * 70_000)  # past one 64 KiB read
    (root / "UPPER.MD").write_bytes(b"upper")
    (root / "été ünï 😀.md").write_bytes("é".encode())
    (root / "empty.md").write_bytes(b"")
    (root / "text.txt").write_bytes(b"not markdown")
    (root / "folder.md").mkdir()
    os.symlink("a/b/deep.md", root / "link.md")  # inside: the Python reads it
    os.symlink("a", root / "linked")  # a linked folder inside
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"secret")
    os.symlink(str(outside), root / "out.md")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe.md")
    return root


RELS = [
    "a/b/deep.md",
    "Note.md",
    "UPPER.MD",
    "été ünï 😀.md",
    "empty.md",
    "text.txt",
    "folder.md",
    "link.md",
    "linked/b/deep.md",
    "out.md",
    "pipe.md",
    "gone.md",
    "a/gone/x.md",
    "a/b",
]


@pytest.mark.parametrize("rel", RELS)
@pytest.mark.parametrize("walk", [False, True])
def test_the_c_reads_what_the_python_reads_or_leaves_it(vault: Path, rel: str, walk: bool):
    reader = NoteReader(vault)
    parts = _parts(rel)
    expected = _outcome(lambda: reader.read_py(parts))
    got = native.read_plain(reader.vault_real, parts, walk)
    if got is not None:
        assert got == expected
    assert _outcome(lambda: reader.read(rel)) == expected


@pytest.mark.parametrize("rel", ["link.md", "linked/b/deep.md", "out.md", "text.txt", "pipe.md"])
@pytest.mark.parametrize("walk", [False, True])
def test_a_symlink_or_anything_odd_is_left_to_the_python(vault: Path, rel: str, walk: bool):
    reader = NoteReader(vault)
    assert native.read_plain(reader.vault_real, _parts(rel), walk) is None


def test_a_vault_reached_through_a_symlink_is_read_by_its_real_path(tmp_path: Path, vault):
    os.symlink(vault, tmp_path / "via")
    reader = NoteReader(tmp_path / "via")
    assert native.read_plain(reader.vault_real, ["Note.md"]) == b"x" * 70_000
    assert native.read_plain(str(tmp_path / "via"), ["Note.md"]) is None  # not a real path


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="/\\\x00"),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_any_name(tmp_path_factory, names: list[str]) -> None:
    root = tmp_path_factory.mktemp("v")
    names = [*names[:-1], names[-1] + ".md"]
    try:
        parts = _parts("/".join(names))
        path = root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes("/".join(names).encode())
    except Exception:  # noqa: BLE001 - a name the Python refuses or the system cannot hold
        return
    reader = NoteReader(root)
    expected = _outcome(lambda: reader.read_py(parts))
    for walk in (False, True):
        got = native.read_plain(reader.vault_real, parts, walk)
        assert got is None or got == expected
    assert _outcome(lambda: reader.read("/".join(names))) == expected


@pytest.mark.parametrize("rel", ["a/b/deep.md", "Note.md", "UPPER.MD", "été ünï 😀.md", "empty.md"])
@pytest.mark.parametrize("walk", [False, True])
def test_a_plain_note_is_read_by_the_c(vault: Path, rel: str, walk: bool):
    reader = NoteReader(vault)
    got = native.read_plain(reader.vault_real, _parts(rel), walk)
    assert got is not None and got == (vault / rel).read_bytes()
