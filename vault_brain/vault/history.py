"""The bytes a vault-brain write replaced, kept so that no person's edit is ever lost.

Every replace (a model's update, a summary written back, a restore) keeps the file it
replaces here before the new one takes its name; a delete keeps it in `.trash/`. The
version check refuses a write when the note changed since it was read, and is re-checked
under the note's lock just before the rename; what can still slip in after that check (an
editor's save in the microseconds before the rename, or an editor writing into a file it
had open) lands in the kept copy, never nowhere.

Layout: `<vault>/.vault-brain/history/<note path>/<UTC time>.md`, one file per replaced
version, so the versions of one note are one folder listing (`list_versions`). Bounded:
the newest KEEP_PER_NOTE versions of each note, and at most MAX_TOTAL_BYTES for the vault
after every write (the oldest dropped first, whichever note; never what that write kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from vault_brain.errors import InvalidInput, NotFound
from vault_brain.vault import kept, writer
from vault_brain.vault.kept import KEEP_PER_NOTE, MAX_TOTAL_BYTES, note_folder, prune
from vault_brain.vault.note import file_version

__all__ = [
    "KEEP_PER_NOTE",
    "MAX_TOTAL_BYTES",
    "Version",
    "list_versions",
    "note_folder",
    "prune",
    "read_version",
    "restore",
]


@dataclass(frozen=True)
class Version:
    """One kept version of a note, newest first in `list_versions`."""

    name: str  # the entry's file name: give it to read_version / restore
    saved_at: str  # when a vault-brain write replaced these bytes, ISO 8601 UTC
    version: str  # the note's version these bytes had (as every read returns it)
    size: int


def list_versions(root: Path, rel: str) -> list[Version]:
    """The kept versions of the note at vault-relative `rel`, newest first."""
    folder = kept.note_folder(root, rel)
    out = []
    for name, path in kept.entries(folder):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # pruned by another process meanwhile
        stamp = kept.ENTRY.match(name).group(1)  # type: ignore[union-attr]
        moment = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ")
        out.append(
            Version(name, moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), file_version(data), len(data))
        )
    out.reverse()
    return out


def read_version(root: Path, rel: str, name: str) -> bytes:
    """The bytes of one kept version (a name from list_versions)."""
    if not isinstance(name, str) or not kept.ENTRY.match(name):
        raise InvalidInput("not a history entry name")
    try:
        return (kept.note_folder(root, rel) / name).read_bytes()
    except FileNotFoundError as exc:
        raise NotFound("no such version of this note (it may have been pruned)") from exc


def restore(
    root: Path,
    rel: str,
    name: str,
    expected_version: str | None,
    *,
    allowed_folders: tuple[str, ...] | list[str] = (),
    to: str | None = None,
) -> str:
    """Put a version kept for the note at `rel` back, at `to` (default: `rel`; the note's
    path now, when it has moved); returns the note's new version.

    A normal write: `expected_version` is the version of the note at `to` as the caller
    last read it (Conflict when it changed since), and what it replaces is kept in turn.
    None means no note is there (it was deleted): the version is written under that path,
    never over a file that has appeared there.
    """
    data = read_version(root, rel, name)
    target = to or rel
    if expected_version is None:
        writer.create_note_at(root, target, data, allowed_folders=allowed_folders)
        return file_version(data)
    return writer.replace_note_file(
        root, target, expected_version, data, allowed_folders=allowed_folders
    )
