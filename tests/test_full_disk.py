"""A full disk, for real: a small tmpfs mounted for the test (root only; skipped with the
reason where mounting is not allowed). What a model gets is UNAVAILABLE, retryable, saying
the disk is full, with nothing written; once space is freed the same call succeeds; and
index writes that fail for lack of space give back what they took (issue 25, item 14)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from vault_brain.config import load_settings
from vault_brain.errors import Unavailable
from vault_brain.service import Brain


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "4m") -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Take every free byte of the file system holding `folder` but `leave`."""
    filler = folder / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def brain_over(vault: Path, **sections: dict) -> Brain:
    sections.setdefault("embed", {"provider": "none", "strong": "none"})
    brain = Brain(load_settings(vault=str(vault), env={}, overrides=sections))
    brain.sync()
    return brain


def assert_disk_full(err: pytest.ExceptionInfo) -> None:
    assert err.value.code == "UNAVAILABLE" and err.value.retryable is True
    assert "disk" in err.value.message and "full" in err.value.message, err.value.message
    assert err.value.details.get("reason") == "disk_full"


def notes_in(vault: Path) -> set[str]:
    return {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")} - {
        p.relative_to(vault).as_posix() for p in (vault / ".vault-brain").rglob("*.md")
    }


def test_save_and_update_with_the_vault_full_say_disk_full_and_work_once_space_is_freed(
    tmp_path,
):
    with small_disk(tmp_path / "vault") as vault:
        brain = brain_over(vault, index={"path": str(tmp_path / "index" / "index.db")})
        try:
            saved = brain.save("Kiln", "first text")
            before = (vault / saved.path).read_bytes()
            filler = fill(vault)
            with pytest.raises(Unavailable) as err:
                brain.save("Glaze", "a new note " * 2000)
            assert_disk_full(err)
            with pytest.raises(Unavailable) as err:
                brain.update(saved.id, saved.version, append="more words " * 2000)
            assert_disk_full(err)
            assert notes_in(vault) == {saved.path}  # nothing half-written
            assert (vault / saved.path).read_bytes() == before
            filler.unlink()
            assert brain.save("Glaze", "a new note " * 2000).indexed
            brain.update(saved.id, saved.version, append="more words " * 2000)
        finally:
            brain.close()


def test_an_update_with_the_index_folder_full_says_disk_full_and_works_once_space_is_freed(
    tmp_path,
):
    vault = tmp_path / "vault"
    with small_disk(vault / ".vault-brain"):
        brain = brain_over(vault)
        try:
            saved = brain.save("Kiln", "first text " * 500)
            before = (vault / saved.path).read_bytes()
            filler = fill(vault / ".vault-brain")
            with pytest.raises(Unavailable) as err:  # what it replaces cannot be kept
                brain.update(saved.id, saved.version, append="more")
            assert_disk_full(err)
            assert (vault / saved.path).read_bytes() == before
            filler.unlink()
            brain.update(saved.id, saved.version, append="more")
        finally:
            brain.close()


def test_index_writes_that_failed_for_lack_of_space_give_back_what_they_took(tmp_path):
    """A write transaction that fails on a full disk has already grown the WAL into the
    last free bytes, and SQLite keeps a WAL's size: that space stayed taken after the
    person freed some, and the next update failed again."""
    vault = tmp_path / "vault"
    with small_disk(vault / ".vault-brain"):
        brain = brain_over(vault)
        try:
            brain.save("Kiln", "first text")
            wal = vault / ".vault-brain" / "index.db-wal"
            held = wal.stat().st_size
            filler = fill(vault / ".vault-brain", leave=300_000)
            for n in range(20):  # the files land; their index writes fail
                result = brain.save(f"Note {n}", f"note {n} " + "lorem ipsum dolor " * 400)
                assert result.path in notes_in(vault)
            assert not result.indexed
            grown = wal.stat().st_size
            assert grown > held  # what the failed writes took
            filler.unlink()
            assert brain.save("Glaze", "a note once space is free").indexed
            assert wal.stat().st_size < grown
            brain.sync()  # the notes whose index writes failed are caught up
            assert brain.status().notes == 22
        finally:
            brain.close()
