"""The bytes a vault-brain write replaced, kept so that no person's edit is ever lost.

Every replace (a model's update, a summary written back, a restore) keeps the file it
replaces here before the new one takes its name; a delete keeps it in `.trash/`. The
version check refuses a write when the note changed since it was read, and is re-checked
under the note's lock just before the rename; what can still slip in after that check (an
editor's save in the microseconds before the rename, or an editor writing into a file it
had open) lands in the kept copy, never nowhere.

Layout: `<vault>/.vault-brain/history/<note path>/<UTC time>.md`, one file per replaced
version, so the versions of one note are one folder listing (`list_versions`). Bounded:
the newest KEEP_PER_NOTE versions of each note, and MAX_TOTAL_BYTES for the vault (oldest
dropped first, the newest version of every note kept).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vault_brain import log
from vault_brain.errors import Forbidden, InvalidInput, NotFound, Unavailable
from vault_brain.vault.locks import state_dir
from vault_brain.vault.note import file_version
from vault_brain.vault.paths import resolve_note_path, vault_relative

HISTORY_DIR = "history"
KEEP_PER_NOTE = 20
MAX_TOTAL_BYTES = 100_000_000
PRUNE_EVERY_SECONDS = 60.0
# Longer mirrored paths go to a folder named by a hash (file systems cap path length).
_MAX_MIRROR_BYTES = 1024
_ENTRY = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)(?:-(\d+))?\.md$")
_last_prune: dict[str, float] = {}


@dataclass(frozen=True)
class Version:
    """One kept version of a note, newest first in `list_versions`."""

    name: str  # the entry's file name: give it to read_version / restore
    saved_at: str  # when a vault-brain write replaced these bytes, ISO 8601 UTC
    version: str  # the note's version these bytes had (as every read returns it)
    size: int


def list_versions(root: Path, rel: str) -> list[Version]:
    """The kept versions of the note at vault-relative `rel`, newest first."""
    folder = note_folder(root, rel)
    out = []
    for name, path in _entries(folder):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # pruned by another process meanwhile
        stamp = _ENTRY.match(name).group(1)  # type: ignore[union-attr]
        moment = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ")
        out.append(
            Version(name, moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), file_version(data), len(data))
        )
    out.reverse()
    return out


def read_version(root: Path, rel: str, name: str) -> bytes:
    """The bytes of one kept version (a name from list_versions)."""
    if not isinstance(name, str) or not _ENTRY.match(name):
        raise InvalidInput("not a history entry name")
    try:
        return (note_folder(root, rel) / name).read_bytes()
    except FileNotFoundError as exc:
        raise NotFound("no such version of this note (it may have been pruned)") from exc


def restore(
    root: Path,
    rel: str,
    name: str,
    expected_version: str | None,
    *,
    allowed_folders: tuple[str, ...] | list[str] = (),
) -> str:
    """Put a kept version back; returns the note's new version.

    A normal write: `expected_version` is the version of the note as the caller last read
    it (Conflict when it changed since), and what it replaces is kept in turn. None means
    the note is gone (deleted or moved): the version is written under its old path, never
    over a file that has appeared there.
    """
    from vault_brain.vault import writer  # writer keeps history: imported late, no cycle

    data = read_version(root, rel, name)
    if expected_version is None:
        writer.create_note_at(root, rel, data, allowed_folders=allowed_folders)
        return file_version(data)
    return writer.replace_note_file(
        root, rel, expected_version, data, allowed_folders=allowed_folders
    )


def note_folder(root: Path, rel: str) -> Path:
    """Where the versions of the note at vault-relative `rel` are kept: by its real path, so
    a note reached through a symlinked folder has one history."""
    real_rel = vault_relative(Path(root), resolve_note_path(Path(root), rel))
    parts = real_rel.split("/")
    base = state_dir(root) / HISTORY_DIR
    if sum(len(p.encode("utf-8", "surrogatepass")) + 1 for p in parts) > _MAX_MIRROR_BYTES:
        digest = hashlib.blake2b("/".join(parts).encode("utf-8", "surrogatepass"), digest_size=16)
        return base / "_long" / digest.hexdigest()
    return base.joinpath(*parts)


def new_entry(root: Path, rel: str) -> Path:
    """Claim a fresh, empty entry for the note (O_EXCL) and return its path.

    Raises Forbidden when the history folder leads outside the vault, Unavailable when it
    cannot be created: a write that cannot keep what it replaces does not happen.
    """
    folder = note_folder(root, rel)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Unavailable(
            f"cannot keep the replaced version in {HISTORY_DIR}/ ({exc.strerror}); "
            "nothing was written"
        ) from exc
    root_real = os.path.realpath(root)
    if os.path.commonpath([root_real, os.path.realpath(folder)]) != root_real:
        raise Forbidden("the vault's history folder leads outside the vault")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    for n in range(1, 1000):
        path = folder / (f"{stamp}.md" if n == 1 else f"{stamp}-{n}.md")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise Unavailable("cannot name a history entry; try again")


def prune_note(root: Path, rel: str, keep: int = KEEP_PER_NOTE) -> int:
    """Drop the oldest versions of one note beyond `keep`; returns how many."""
    entries = _entries(note_folder(root, rel))
    dropped = 0
    for _, path in entries[: max(0, len(entries) - keep)]:
        dropped += _unlink(path)
    return dropped


def prune(
    root: Path, *, keep_per_note: int = KEEP_PER_NOTE, max_bytes: int = MAX_TOTAL_BYTES
) -> int:
    """Bound the whole history: per note `keep_per_note`, then oldest first until the vault's
    history is under `max_bytes` (each note keeps its newest version). Returns how many
    versions were dropped."""
    base = state_dir(root) / HISTORY_DIR
    dropped = 0
    kept: list[tuple[str, int, Path]] = []  # (stamp, size, path) of droppable versions
    total = 0
    for folder, _dirs, files in os.walk(base):
        entries = sorted(((n, Path(folder) / n) for n in files if _ENTRY.match(n)), key=_by_time)
        excess = max(0, len(entries) - keep_per_note)
        for _, path in entries[:excess]:
            dropped += _unlink(path)
        for i, (name, path) in enumerate(entries[excess:]):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            total += size
            if i < len(entries) - excess - 1:  # never the note's newest
                kept.append((_sort_key(name), size, path))
    kept.sort(key=lambda item: item[0])
    for _, size, path in kept:
        if total <= max_bytes:
            break
        dropped += _unlink(path)
        total -= size
    if dropped:
        log.event("history_pruned", dropped=dropped)
    return dropped


def maybe_prune(root: Path, rel: str) -> None:
    """After a write: bound this note's versions now, the whole history now and then."""
    try:
        prune_note(root, rel)
        key = os.path.realpath(root)
        now = time.monotonic()
        if now - _last_prune.get(key, -PRUNE_EVERY_SECONDS) >= PRUNE_EVERY_SECONDS:
            _last_prune[key] = now
            prune(root)
    except (OSError, Forbidden, InvalidInput) as exc:
        log.warn("history_prune_failed", error=type(exc).__name__)


def _entries(folder: Path) -> list[tuple[str, Path]]:
    """(name, path) of the kept versions in a folder, oldest first."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(((n, folder / n) for n in names if _ENTRY.match(n)), key=_by_time)


def _sort_key(name: str) -> tuple[str, int]:
    m = _ENTRY.match(name)
    assert m is not None
    return m.group(1), int(m.group(2) or 1)


def _by_time(entry: tuple[str, Path]) -> tuple[str, int]:
    return _sort_key(entry[0])


def _unlink(path: Path) -> int:
    try:
        os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0
