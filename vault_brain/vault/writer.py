"""The only code that changes files in the vault: create, replace, trash.

Invariant 2 lives here: no user's words are ever lost. Every write goes through a temp
file in the same folder that is fsynced and renamed into place; creating never
overwrites; replacing and trashing name the version the caller read and are refused
with Conflict when the file changed since (the person edited it in Obsidian).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from vault_brain import log
from vault_brain.errors import Conflict, Forbidden, InvalidInput, NotFound
from vault_brain.vault.note import file_version
from vault_brain.vault.paths import (
    resolve_folder_path,
    resolve_note_path,
    safe_filename,
    vault_relative,
)

TRASH_DIR = ".trash"
_MAX_SUFFIX = 10_000
# Threads of one process must not both pass a version check for the same file; striped
# locks keep that true without a lock per path that lives forever.
_LOCKS = tuple(threading.Lock() for _ in range(64))
# New files get the permissions any editor would give them, not mkstemp's 0600.
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half.

    On any failure the temp file is removed and the original is untouched. The original's
    permission bits are kept.
    """
    path = Path(path)
    tmp = _write_temp(path.parent, data, _mode_of(path))
    try:
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    _fsync_dir(path.parent)


def create_note_file(
    root: Path,
    folder: str | None,
    title: str,
    data: bytes,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Write a new note named after its title; never overwrite. Returns its vault path.

    A taken name gets a number ("Title 2.md", "Title 3.md", ...). The content appears
    whole under its final name: it is linked there from a synced temp file, and a link
    fails rather than replace an existing file.
    """
    root = Path(root)
    folder_path = resolve_folder_path(root, folder, allowed_folders=allowed_folders)
    _make_folders(folder_path)
    # Re-check after creating folders: nothing may have swapped in a symlink meanwhile.
    folder_path = resolve_folder_path(root, folder, allowed_folders=allowed_folders)
    stem = safe_filename(title).removesuffix(".md")
    folder_rel = vault_relative(root, folder_path)
    tmp = _write_temp(folder_path, data, None)
    try:
        for n in range(1, _MAX_SUFFIX):
            name = f"{stem}.md" if n == 1 else f"{stem} {n}.md"
            rel = f"{folder_rel}/{name}" if folder_rel != "." else name
            target = resolve_note_path(root, rel, allowed_folders=allowed_folders)
            if _place_new(tmp, target):
                break
        else:
            raise Conflict("too many notes share this title in this folder")
    finally:
        _discard(tmp)
    _fsync_dir(folder_path)
    log.event("note_created", path=log.cut(vault_relative(root, target)))
    return vault_relative(root, target)


def replace_note_file(
    root: Path,
    rel: str,
    expected_version: str,
    new_data: bytes,
    *,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Replace a note's bytes if they are still the version the caller read; returns the new one.

    The slow part (writing and syncing the temp file) happens before the final version
    check, so the window in which another editor's save could slip in is a read and a rename.
    """
    path = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    with _lock_for(path):
        _check_version(_read_current(path), expected_version)
        tmp = _write_temp(path.parent, new_data, _mode_of(path))
        try:
            _check_version(_read_current(path), expected_version)
            os.replace(tmp, path)
        except BaseException:
            _discard(tmp)
            raise
    _fsync_dir(path.parent)
    return file_version(new_data)


def trash_note_file(
    root: Path,
    rel: str,
    expected_version: str,
    *,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Move a note to `<vault>/.trash/<its path>` (Obsidian's convention); never unlink it.

    A name already in the trash gets a number ("Note 2.md"). Returns the trashed path,
    vault-relative.
    """
    root = Path(root)
    path = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    note_rel = Path(vault_relative(root, path))
    trash_root = root / TRASH_DIR
    dest_dir = trash_root.joinpath(*note_rel.parent.parts)
    # Refuse a stale delete before touching .trash at all; checked again under the lock.
    _check_version(_read_current(path), expected_version)
    _check_trash_inside(root, dest_dir)
    _make_folders(dest_dir)
    _check_trash_inside(root, dest_dir)
    with _lock_for(path):
        _check_version(_read_current(path), expected_version)
        dest = _reserve_unique(dest_dir, note_rel.stem, note_rel.suffix)
        moved = False
        try:
            _check_version(_read_current(path), expected_version)
            _move_onto_placeholder(path, dest)
            moved = True
        finally:
            if not moved:
                _discard(str(dest))
    _fsync_dir(path.parent)
    _fsync_dir(dest_dir)
    trashed = vault_relative(root, dest)
    log.event("note_trashed", path=log.cut(trashed))
    return trashed


# --- helpers ----------------------------------------------------------------------------


def _write_temp(folder: Path, data: bytes, mode: int | None) -> str:
    """A synced temp file beside the target (a rename never crosses file systems)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput("note data must be bytes")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".vb-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_UMASK)
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _place_new(tmp: str, target: Path) -> bool:
    """Give the temp file's content the name `target` unless that name exists."""
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EMLINK,
            errno.EXDEV,
        ):
            raise
    # No hard links here (FAT, some network shares): claim the name, then rename onto it.
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return False
    os.close(fd)
    os.replace(tmp, target)
    return True


def _reserve_unique(folder: Path, stem: str, suffix: str) -> Path:
    """Claim a free name in `folder` with an empty placeholder (O_EXCL: no races)."""
    for n in range(1, _MAX_SUFFIX):
        candidate = folder / (f"{stem}{suffix}" if n == 1 else f"{stem} {n}{suffix}")
        try:
            fd = os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            continue
        os.close(fd)
        return candidate
    raise Conflict("too many trashed notes share this name")


def _move_onto_placeholder(src: Path, dest: Path) -> None:
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        # .trash on another file system: copy, sync, and only then remove the original.
        shutil.copy2(src, dest)
        with open(dest, "rb") as fh:
            os.fsync(fh.fileno())
        os.unlink(src)


def _make_folders(folder: Path) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError as exc:
        raise InvalidInput("a file stands where the folder should be") from exc
    except NotADirectoryError as exc:
        raise InvalidInput("a file stands where a folder should be") from exc


def _check_trash_inside(root: Path, dest_dir: Path) -> None:
    """`.trash` (or a folder in it) that is a symlink out of the vault is not a trash."""
    root_real = os.path.realpath(root)
    dest_real = os.path.realpath(dest_dir)
    if os.path.commonpath([root_real, dest_real]) != root_real:
        raise Forbidden("the vault's .trash folder leads outside the vault")


def _read_current(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFound("no note at this path") from exc
    except IsADirectoryError as exc:
        raise InvalidInput("this path is a folder, not a note") from exc


def _check_version(current: bytes, expected: str) -> None:
    version = file_version(current)
    if version != expected:
        raise Conflict(
            "the note changed since it was read; read it again and retry",
            current_version=version,
        )


def _mode_of(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _lock_for(path: Path) -> threading.Lock:
    return _LOCKS[hash(os.path.realpath(path)) % len(_LOCKS)]


def _discard(tmp: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(tmp)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable; not every platform can open a folder for this."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
