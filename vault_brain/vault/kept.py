"""Where the versions kept by `history` live on disk, and how they stay bounded.

`<vault>/.vault-brain/history/<note path>/<UTC time>.md`: one file per replaced version,
so one note's versions are one folder listing; the newest KEEP_PER_NOTE of each note, and
MAX_TOTAL_BYTES for the vault (oldest first, each note's newest kept). The writer stages
and keeps entries here; `history` is the API that lists and restores them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from vault_brain import log
from vault_brain.errors import DISK_FULL_ERRNOS, Forbidden, InvalidInput, Unavailable, disk_full
from vault_brain.vault.locks import state_dir
from vault_brain.vault.paths import claim_free_name, resolve_note_path, vault_relative

HISTORY_DIR = "history"
KEEP_PER_NOTE = 20
MAX_TOTAL_BYTES = 100_000_000
PRUNE_EVERY_SECONDS = 60.0
# Longer mirrored paths go to a folder named by a hash (file systems cap path length).
_MAX_MIRROR_BYTES = 1024
ENTRY = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)(?:-(\d+))?\.md$")
_last_prune: dict[str, float] = {}


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
        if exc.errno in DISK_FULL_ERRNOS:
            raise disk_full("the vault's .vault-brain folder (the kept versions)") from exc
        raise Unavailable(
            f"cannot keep the replaced version in {HISTORY_DIR}/ ({exc.strerror}); "
            "nothing was written"
        ) from exc
    root_real = os.path.realpath(root)
    if os.path.commonpath([root_real, os.path.realpath(folder)]) != root_real:
        raise Forbidden("the vault's history folder leads outside the vault")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    names = (folder / (f"{stamp}.md" if n == 1 else f"{stamp}-{n}.md") for n in range(1, 1000))
    path = claim_free_name(names)
    if path is None:
        raise Unavailable("cannot name a history entry; try again")
    return path


def move_history(root: Path, old_rel: str, new_rel: str) -> None:
    """A note renamed by vault-brain takes its kept versions along, so `history` by its id
    or its new path still lists them. Entries keep their names (their times); one that
    meets a name already there (an earlier note at the new path) gets a number. What cannot
    be moved stays under the old path: never lost, only found there."""
    src, dst = note_folder(root, old_rel), note_folder(root, new_rel)
    found = entries(src)
    if not found or src == dst:
        return
    try:
        os.makedirs(dst, mode=0o700, exist_ok=True)
        for name, path in found:
            stamp = sort_key(name)[0]
            names = [dst / name] + [dst / f"{stamp}-{n}.md" for n in range(2, 1000)]
            for target in names:
                try:
                    os.link(path, target)
                except FileExistsError:
                    continue
                os.unlink(path)
                break
        with contextlib.suppress(OSError):
            os.rmdir(src)
    except OSError as exc:
        log.warn("history_not_moved", error=type(exc).__name__)


def prune_note(root: Path, rel: str, keep: int = KEEP_PER_NOTE) -> int:
    """Drop the oldest versions of one note beyond `keep`; returns how many."""
    found = entries(note_folder(root, rel))
    dropped = 0
    for _, path in found[: max(0, len(found) - keep)]:
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
        listed = sorted(((n, Path(folder) / n) for n in files if ENTRY.match(n)), key=_by_time)
        excess = max(0, len(listed) - keep_per_note)
        for _, path in listed[:excess]:
            dropped += _unlink(path)
        for i, (name, path) in enumerate(listed[excess:]):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            total += size
            if i < len(listed) - excess - 1:  # never the note's newest
                kept.append((sort_key(name), size, path))
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


def entries(folder: Path) -> list[tuple[str, Path]]:
    """(name, path) of the kept versions in a folder, oldest first."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(((n, folder / n) for n in names if ENTRY.match(n)), key=_by_time)


def sort_key(name: str) -> tuple[str, int]:
    m = ENTRY.match(name)
    assert m is not None
    return m.group(1), int(m.group(2) or 1)


def _by_time(entry: tuple[str, Path]) -> tuple[str, int]:
    return sort_key(entry[0])


def _unlink(path: Path) -> int:
    try:
        os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0
