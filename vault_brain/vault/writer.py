"""The only code that changes files in the vault: create, replace, trash.

Invariant 2 lives here: no user's words are ever lost. Every write goes through a synced
file that is linked or renamed into place (a new note's has no name until then, where the
system allows it); creating never overwrites; replacing and trashing name
the version the caller read and are refused with Conflict when the file changed since
(the person edited it in Obsidian). The check and the rename happen under the note's lock
(`locks.note_lock`: every process, not just this one), and a replace keeps the bytes it
replaces in the note's history (`history`), so what an editor saves in the last instant
before the rename is kept too.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, suppress
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from vault_brain import log
from vault_brain.errors import (
    DISK_FULL_ERRNOS,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unavailable,
    disk_full,
)
from vault_brain.vault import kept
from vault_brain.vault.locks import note_lock, state_dir
from vault_brain.vault.note import file_version
from vault_brain.vault.paths import (
    claim_free_name,
    name_key,
    resolve_folder_path,
    resolve_note_path,
    safe_filename,
    vault_relative,
)

TRASH_DIR = ".trash"
_MAX_SUFFIX = 10_000
TEMP_PREFIX = ".vb-"
TEMP_SUFFIX = ".tmp"
# mkstemp's names: the prefix, 8 characters of its alphabet, the suffix. Nothing else is ours.
_TEMP_NAME = re.compile(r"^\.vb-[a-z0-9_]{8}\.tmp$")
STALE_TEMP_SECONDS = 60.0
# New files get the permissions any editor would give them, not mkstemp's 0600.
_UMASK = os.umask(0)
os.umask(_UMASK)
# Free bytes under which a file system counts as the full one a failed write met.
_NEARLY_FULL = 1 << 20

T = TypeVar("T")


def _says_disk_full(write: Callable[..., T]) -> Callable[..., T]:
    """A full disk is said as such (Unavailable, retryable), never an unexplained OSError.
    Every write below cleans up after itself on any error, so nothing was written."""

    @wraps(write)
    def run(root: Path, *args: Any, **kwargs: Any) -> T:
        try:
            return write(root, *args, **kwargs)
        except OSError as exc:
            if exc.errno not in DISK_FULL_ERRNOS:
                raise
            raise disk_full(_full_place(Path(root))) from exc

    return run


def _full_place(root: Path) -> str:
    """Which of the vault and its .vault-brain folder (where replaced versions are kept)
    lies on the full file system, in words."""
    places = {"the vault": root}
    with suppress(Forbidden):
        places["the vault's .vault-brain folder (the kept versions)"] = state_dir(root)
    full, devices = [], set()
    for name, path in places.items():
        try:
            info, dev = os.statvfs(path), os.stat(path).st_dev
        except OSError:
            continue
        if info.f_bavail * info.f_frsize < _NEARLY_FULL and dev not in devices:
            full.append(name)
            devices.add(dev)
    return " and ".join(full) or "the vault"


@_says_disk_full
def create_note_file(
    root: Path,
    folder: str | None,
    title: str,
    data: bytes,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Write a new note named after its title; never overwrite. Returns its vault path.

    A taken name gets a number ("Title 2.md", "Title 3.md", ...). The content appears
    whole under its final name: it is written and synced first, then linked there, and a
    link fails rather than replace an existing file.
    """
    root = Path(root)
    _check_data(data)
    folder_path = _writable_folder(root, folder, allowed_folders)
    stem = safe_filename(title).removesuffix(".md")
    folder_rel = vault_relative(root, folder_path)
    # "Café.md" written by macOS (decomposed) or "café.md" is the same name to the person
    # and to Obsidian: a new note never takes a name that only differs from one in spelling.
    taken = _taken_keys(folder_path, stem)
    name = _create_new(folder_path, data, lambda: _title_names(stem, taken))
    if name is None:
        raise Conflict("too many notes share this title in this folder")
    rel = f"{folder_rel}/{name}" if folder_rel != "." else name
    log.event("note_created", path=log.cut(rel))
    return rel


def _writable_folder(root: Path, folder: str | None, allowed_folders: Sequence[str]) -> Path:
    """The checked real path of a folder to create a note in, made if missing."""
    path = resolve_folder_path(root, folder, allowed_folders=allowed_folders)
    if path.is_dir():  # the resolver left no symlink below the root: it is a folder
        return path
    _make_folders(path)
    # Re-check after creating folders: nothing may have swapped in a symlink meanwhile.
    return resolve_folder_path(root, folder, allowed_folders=allowed_folders)


@_says_disk_full
def create_note_at(
    root: Path, rel: str, data: bytes, *, allowed_folders: Sequence[str] = ()
) -> str:
    """Write a note under exactly this path, only if nothing is there (a restore of a note
    that was deleted or moved). Returns its vault path."""
    root = Path(root)
    target = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    _make_folders(target.parent)
    target = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    _check_data(data)
    with note_lock(root, vault_relative(root, target)):
        if target.exists() or _create_new(target.parent, data, lambda: [target.name]) is None:
            raise Conflict("a file exists at this path now; read it first")
    return vault_relative(root, target)


@_says_disk_full
def replace_note_file(
    root: Path,
    rel: str,
    expected_version: str,
    new_data: bytes,
    *,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Replace a note's bytes if they are still the version the caller read; returns the new one.

    Under the note's lock (every process): the new bytes are written and synced, the file
    is checked once more, and the two change places. The bytes replaced are kept in the
    note's history; if they turn out not to be the version checked (an editor saved in
    between), they go back and the write is refused with Conflict. What an editor writes
    into the old file after that (it still had it open) lands in the kept copy.
    """
    root = Path(root)
    _check_data(new_data)
    path = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    note_rel = vault_relative(root, path)
    # Refuse a stale write before creating anything (no lock, no history, no temp file).
    _check_version(_read_current(path), expected_version)
    with note_lock(root, note_rel):
        entry = _swap_in(root, note_rel, path, expected_version, new_data)
        if entry is None:
            entry = _replace_aside(root, note_rel, path, expected_version, new_data)
        if entry is None:
            entry = _replace_copy(root, note_rel, path, expected_version, new_data)
    _fsync_dir(path.parent)
    kept.maybe_prune(root, note_rel, entry)
    return file_version(new_data)


def _swap_in(root: Path, note_rel: str, path: Path, expected: str, new_data: bytes) -> Path | None:
    """Replace by exchanging names (Linux renameat2, macOS renamex_np): the new bytes are
    staged as a history entry, and after the exchange that entry holds exactly what was at
    the note's path, whatever raced in. Returns that entry; None when the platform or file
    system cannot."""
    if _EXCHANGE is None:
        return None
    mode = _mode_of(path)
    entry = kept.new_entry(root, note_rel)
    try:
        if os.stat(entry.parent).st_dev != os.stat(path.parent).st_dev:
            _discard(str(entry))
            return None
        _fill(entry, new_data, mode)
        ours = os.stat(entry).st_ino
        _check_version(_read_current(path), expected)
        try:
            _EXCHANGE(entry, path)
        except FileNotFoundError as exc:
            raise NotFound("no note at this path") from exc
        except OSError as exc:
            if exc.errno not in _NO_EXCHANGE:
                raise
            _discard(str(entry))
            return None
    except BaseException:
        _discard(str(entry))
        raise
    replaced = _read_current(entry)
    if file_version(replaced) != expected:
        # A save landed between the check and the exchange: it takes its place back.
        _give_back(entry, path, ours)
        raise Conflict(
            "the note changed since it was read; read it again and retry",
            current_version=file_version(_read_current(path)),
        )
    _fsync_dir(entry.parent)
    return entry


def _give_back(entry: Path, path: Path, ours: int) -> None:
    try:
        _EXCHANGE(entry, path)  # type: ignore[misc]
    except FileNotFoundError:
        # The note was removed meanwhile: the save goes back under its name if still free.
        if _place_new(str(entry), path):
            _discard(str(entry))
        return
    with suppress(FileNotFoundError):
        if os.stat(entry).st_ino == ours:
            _discard(str(entry))  # our bytes, never applied; anything else stays in history


def _replace_aside(
    root: Path, note_rel: str, path: Path, expected: str, new_data: bytes
) -> Path | None:
    """Replace where names cannot be exchanged: move the note into its history (which keeps
    exactly what was at its path, whatever raced in), check those bytes, then give the new
    bytes the free name without overwriting (a save that lands meanwhile wins). The note is
    absent for the microseconds between the two steps. Returns the history entry; None
    across file systems."""
    entry = kept.new_entry(root, note_rel)
    tmp: str | None = None
    try:
        if os.stat(entry.parent).st_dev != os.stat(path.parent).st_dev:
            _discard(str(entry))
            return None
        tmp = _write_temp(path.parent, new_data, _mode_of(path))
        _check_version(_read_current(path), expected)
        try:
            os.replace(path, entry)
        except FileNotFoundError as exc:
            raise NotFound("no note at this path") from exc
    except BaseException:
        _discard(str(entry))
        if tmp is not None:
            _discard(tmp)
        raise
    try:
        if file_version(_read_current(entry)) != expected:
            # A save landed between the check and the move: it takes its place back.
            with suppress(OSError):
                if _place_new(str(entry), path):
                    _discard(str(entry))
            raise Conflict(
                "the note changed since it was read; read it again and retry",
                current_version=_version_at(path, entry),
            )
        if not _place_new(tmp, path):
            raise Conflict(
                "the note changed since it was read; read it again and retry",
                current_version=_version_at(path, entry),
            )
    finally:
        _discard(tmp)
    return entry


def _replace_copy(root: Path, note_rel: str, path: Path, expected: str, new_data: bytes) -> Path:
    """The last resort (the history on another file system than the note): keep a copy of
    the checked bytes, then rename. A save in the instant between is not kept. Returns the
    history entry."""
    tmp = _write_temp(path.parent, new_data, _mode_of(path))
    entry: Path | None = None
    try:
        entry = kept.new_entry(root, note_rel)
        current = _read_current(path)
        _check_version(current, expected)
        _fill(entry, current, None)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        if entry is not None:
            _discard(str(entry))
        raise
    return entry


def _version_at(path: Path, fallback: Path) -> str:
    try:
        return file_version(path.read_bytes())
    except OSError:
        return file_version(_read_current(fallback))


@_says_disk_full
def rename_note_file(
    root: Path,
    rel: str,
    title: str,
    expected_version: str,
    *,
    allowed_folders: Sequence[str] = (),
) -> str:
    """Give a note the file name of its new title, in its folder; returns its new vault
    path (the same one when the name does not change).

    Never overwrites: a taken name gets a number, as a save does ("Title 2.md"). The note
    must still be `expected_version` (checked under its lock); the bytes move as they are,
    so its frontmatter id goes with it.
    """
    root = Path(root)
    path = resolve_note_path(root, rel, allowed_folders=allowed_folders)
    stem = safe_filename(title).removesuffix(".md")
    if name_key(path.name) == name_key(f"{stem}.md"):
        return vault_relative(root, path)
    folder_rel = vault_relative(root, path.parent)
    taken = _taken_keys(path.parent, stem)
    with note_lock(root, vault_relative(root, path)):
        _check_version(_read_current(path), expected_version)
        for name in _title_names(stem, taken):
            new_rel = f"{folder_rel}/{name}" if folder_rel != "." else name
            target = resolve_note_path(root, new_rel, allowed_folders=allowed_folders)
            if _place_new(str(path), target):  # a link: the new name, or nothing
                break
        else:
            raise Conflict("too many notes share this title in this folder")
        # Its kept versions go with it, so `history` by its id or new path lists them.
        kept.move_history(root, vault_relative(root, path), vault_relative(root, target))
        with suppress(FileNotFoundError):  # gone already where links are not supported
            os.unlink(path)
    _fsync_dir(path.parent)
    log.event("note_renamed", path=log.cut(vault_relative(root, target)))
    return vault_relative(root, target)


@_says_disk_full
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
    with note_lock(root, note_rel.as_posix()):
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
        trashed_bytes = _read_current(dest)
        if file_version(trashed_bytes) != expected_version:
            # A save landed between the check and the move: it goes back (if its name is
            # still free; else it stays in the trash, whole) and the delete is refused.
            with suppress(OSError):
                if _place_new(str(dest), path):
                    _discard(str(dest))
            raise Conflict(
                "the note changed since it was read; read it again and retry",
                current_version=file_version(trashed_bytes),
            )
        entry = _keep_deleted(root, note_rel.as_posix(), trashed_bytes)
    _fsync_dir(path.parent)
    _fsync_dir(dest_dir)
    if entry is not None:
        kept.maybe_prune(root, note_rel.as_posix(), entry)
    trashed = vault_relative(root, dest)
    log.event("note_trashed", path=log.cut(trashed))
    return trashed


def _keep_deleted(root: Path, rel: str, data: bytes) -> Path | None:
    """What a delete replaces is kept like what an update replaces, so `history` and
    `restore` find a deleted note by its path even when it was never updated. The trash
    holds it whole already: a copy that cannot be made (a full disk) is only a warning."""
    entry: Path | None = None
    try:
        entry = kept.new_entry(root, rel)
        _fill(entry, data, 0o600)
    except (OSError, Unavailable, Forbidden) as exc:
        if entry is not None:
            _discard(str(entry))
        log.warn("history_not_kept", path=log.cut(rel), error=type(exc).__name__)
        return None
    return entry


# --- helpers ----------------------------------------------------------------------------


def clean_stale_temps(root: Path, older_than: float = STALE_TEMP_SECONDS) -> int:
    """Remove the temp files of saves that never finished (a kill -9 mid-write): ours only
    (`.vb-XXXXXXXX.tmp`, mkstemp's shape), older than `older_than` seconds, in the vault's
    own folders (symlinks are not followed). Returns how many were removed. The indexer
    calls this at start."""
    removed = 0
    cutoff = time.time() - older_than
    folders = [os.fspath(root)]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith("."):
                        folders.append(entry.path)
                    continue
                if not _TEMP_NAME.match(entry.name) or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                    continue  # a save in progress
                os.unlink(entry.path)
                removed += 1
            except OSError:
                continue
    if removed:
        log.event("stale_temps_removed", count=removed)
    return removed


def _check_data(data: object) -> None:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput("note data must be bytes")


def _fill(path: Path, data: bytes, mode: int | None) -> None:
    """Write and sync the bytes of a file we just created (O_EXCL) and own."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, mode if mode is not None else 0o666 & ~_UMASK)


def _taken_keys(folder: Path, stem: str) -> set[str]:
    """The name keys in `folder` that one of stem's names ("Title.md", "Title 2.md", ...)
    could have. Only names that contain the title's key are keyed: in an ASCII folder they
    are found in one pass over the lowered listing (a plain ASCII name's key is its
    stripped lowercase, what name_key gives it); keying every name of a folder of 5,600
    notes cost 1.8 ms per save."""
    prefix = name_key(stem)
    try:
        names = os.listdir(folder)
    except OSError:
        return set()
    listing = "\0".join(names)
    if prefix and listing.isascii() and "\\" not in listing:
        names = _names_holding(listing, prefix)
    keys = set()
    for name in names:
        plain = name.isascii() and "\\" not in name
        key = name.strip().lower() if plain else name_key(name)
        if key.startswith(prefix):
            keys.add(key)
    return keys


def _names_holding(listing: str, part: str) -> list[str]:
    """The NUL-separated names of `listing` whose lowercase contains `part` (not empty)."""
    lowered = listing.lower()
    out = []
    at = lowered.find(part)
    while at != -1:
        start = lowered.rfind("\0", 0, at) + 1
        end = lowered.find("\0", at)
        end = len(lowered) if end == -1 else end
        out.append(listing[start:end])
        at = lowered.find(part, end)
    return out


class _Unsupported(Exception):
    """This folder cannot hold a nameless file (no O_TMPFILE, no /proc to link it)."""


def _create_new(folder: Path, data: bytes, names: Callable[[], Iterable[str]]) -> str | None:
    """Give `data` the first of `names()` still free in `folder`, and sync the folder;
    None when every name is taken. The bytes are synced before they get a name, so the
    note appears whole, and a name never replaces a file."""
    try:
        name = _create_nameless(folder, data, names)
    except _Unsupported:
        name = _create_from_temp(folder, data, names)
    _fsync_dir(folder)
    return name


def _create_nameless(folder: Path, data: bytes, names: Callable[[], Iterable[str]]) -> str | None:
    """Linux: write into a file with no name (O_TMPFILE), then link it under a free name.
    A watcher sees one new file instead of a temp file's five events, and a process killed
    mid-write leaves nothing behind. Raises _Unsupported where the folder cannot."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        raise _Unsupported
    with ExitStack() as opened:
        # Failing to open the folder is _Unsupported too: the named way reports what is wrong.
        dir_fd = _open_for_nameless(folder, os.O_RDONLY | os.O_DIRECTORY)
        opened.callback(os.close, dir_fd)
        fd = _open_for_nameless(".", flag | os.O_WRONLY, dir_fd=dir_fd)
        opened.callback(os.close, fd)
        _write_all(fd, data)
        os.fsync(fd)
        for name in names():
            try:
                # linkat(AT_SYMLINK_FOLLOW) of /proc's link to the open file: the dir fds
                # make os.link use linkat, and the name lands in the folder opened.
                os.link(
                    f"/proc/self/fd/{fd}",
                    name,
                    src_dir_fd=dir_fd,
                    dst_dir_fd=dir_fd,
                    follow_symlinks=True,
                )
                return name
            except FileExistsError:
                continue
            except OSError as exc:  # no /proc, or links refused here
                raise _Unsupported from exc
        return None


def _open_for_nameless(path: Path | str, flags: int, dir_fd: int | None = None) -> int:
    try:
        return os.open(path, flags, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        raise _Unsupported from exc


def _create_from_temp(folder: Path, data: bytes, names: Callable[[], Iterable[str]]) -> str | None:
    """Anywhere else: a synced temp file beside the note, linked (or renamed) into place."""
    tmp = _write_temp(folder, data, None)
    try:
        for name in names():
            if _place_new(tmp, folder / name):
                return name
        return None
    finally:
        _discard(tmp)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_temp(folder: Path, data: bytes, mode: int | None) -> str:
    """A synced temp file beside the target (a rename never crosses file systems)."""
    _check_data(data)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
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


def _title_names(stem: str, taken: set[str]) -> Iterator[str]:
    """ "Title.md", "Title 2.md", ... skipping names taken in any spelling (name_key)."""
    for n in range(1, _MAX_SUFFIX):
        name = f"{stem}.md" if n == 1 else f"{stem} {n}.md"
        if name_key(name) not in taken:
            yield name


def _reserve_unique(folder: Path, stem: str, suffix: str) -> Path:
    """Claim a free name in `folder` with an empty placeholder (O_EXCL: no races)."""
    names = (
        folder / (f"{stem}{suffix}" if n == 1 else f"{stem} {n}{suffix}")
        for n in range(1, _MAX_SUFFIX)
    )
    path = claim_free_name(names)
    if path is None:
        raise Conflict("too many trashed notes share this name")
    return path


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


# --- exchanging two names atomically ----------------------------------------------------

_NO_EXCHANGE = frozenset(
    {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM}
)


def _load_exchange() -> Callable[[Path, Path], None] | None:
    """Linux renameat2(RENAME_EXCHANGE) or macOS renamex_np(RENAME_SWAP), or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if sys.platform.startswith("linux"):
        fn = getattr(libc, "renameat2", None)
        if fn is None:
            return None
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        at_fdcwd, flags = -100, 2  # AT_FDCWD, RENAME_EXCHANGE

        def call(a: bytes, b: bytes) -> int:
            return fn(at_fdcwd, a, at_fdcwd, b, flags)

    elif sys.platform == "darwin":
        fn = getattr(libc, "renamex_np", None)
        if fn is None:
            return None
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]

        def call(a: bytes, b: bytes) -> int:
            return fn(a, b, 0x2)  # RENAME_SWAP

    else:
        return None

    def exchange(a: Path, b: Path) -> None:
        if call(os.fsencode(a), os.fsencode(b)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fspath(b))

    return exchange


_EXCHANGE = _load_exchange()
