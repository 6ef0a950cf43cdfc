"""Where the versions kept by `history` live on disk, and how they stay bounded.

`<vault>/.vault-brain/history/<note path>/<UTC time>.md`: one file per replaced version,
so one note's versions are one folder listing; the newest KEEP_PER_NOTE of each note, and
at most MAX_TOTAL_BYTES for the vault after every write (oldest first, whichever note).
The writer stages and keeps entries here; `history` is the API that lists and restores
them.
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
from vault_brain.vault.locks import note_lock, state_dir
from vault_brain.vault.paths import claim_free_name, resolve_note_path, vault_relative

HISTORY_DIR = "history"
KEEP_PER_NOTE = 20
MAX_TOTAL_BYTES = 100_000_000
# The history's size is counted as writes go (`.usage` in the history folder); a count
# older than this is recounted from the files, which a person may have removed by hand.
USAGE = ".usage"
USAGE_FRESH_SECONDS = 60.0
USAGE_LOCK_KEY = ".vault-brain/history/.usage"  # the lock stripe every process takes for it
# Longer mirrored paths go to a folder named by a hash (file systems cap path length).
_MAX_MIRROR_BYTES = 1024
ENTRY = re.compile(r"^(\d{8}T\d{6}\.\d{6}Z)(?:-(\d+))?\.md$")


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
    """Drop the oldest versions of one note beyond `keep`; returns the bytes freed."""
    found = entries(note_folder(root, rel))
    freed = 0
    for _, path in found[: max(0, len(found) - keep)]:
        freed += _drop(path)
    return freed


def prune(
    root: Path,
    *,
    keep_per_note: int = KEEP_PER_NOTE,
    max_bytes: int | None = None,
    spare: Path | None = None,
) -> int:
    """Bound the whole history: per note `keep_per_note`, then the oldest versions first,
    whichever note they belong to, until it holds at most `max_bytes` (MAX_TOTAL_BYTES).
    `spare` (what the write just made kept) is never dropped. Returns how many versions
    were dropped."""
    cap = MAX_TOTAL_BYTES if max_bytes is None else max_bytes
    with note_lock(root, USAGE_LOCK_KEY):
        dropped, total = _prune_all(root, keep_per_note, cap, spare)
        _write_usage(state_dir(root) / HISTORY_DIR, total)
    return dropped


def _prune_all(
    root: Path, keep_per_note: int, max_bytes: int, spare: Path | None
) -> tuple[int, int]:
    """(versions dropped, bytes the history holds after)."""
    base = state_dir(root) / HISTORY_DIR
    dropped = 0
    candidates: list[tuple[tuple[str, int], int, Path]] = []  # (time, size, path)
    total = 0
    for folder, _dirs, files in os.walk(base):
        listed = sorted(((n, Path(folder) / n) for n in files if ENTRY.match(n)), key=_by_time)
        excess = max(0, len(listed) - keep_per_note)
        for _, path in listed[:excess]:
            dropped += _unlink(path)
        for name, path in listed[excess:]:
            try:
                size = path.stat().st_size
            except OSError:
                continue
            total += size
            if spare is None or path != spare:
                candidates.append((sort_key(name), size, path))
    candidates.sort(key=lambda item: item[0])
    for _, size, path in candidates:
        if total <= max_bytes:
            break
        dropped += _unlink(path)
        total -= size
    if dropped:
        log.event("history_pruned", dropped=dropped)
    return dropped, total


def maybe_prune(root: Path, rel: str, kept_now: Path | None = None) -> None:
    """After a write that kept `kept_now`: this note's newest KEEP_PER_NOTE versions, and
    the vault's history within MAX_TOTAL_BYTES before the write returns, the write that
    crosses it included. The history's size is a running count (`history/.usage`) under a
    lock every process takes, so a write costs no walk of the history unless it crosses
    the cap, or the count is over USAGE_FRESH_SECONDS old (files removed by hand)."""
    try:
        base = state_dir(root) / HISTORY_DIR
        with note_lock(root, USAGE_LOCK_KEY):
            total = _read_usage(base)
            freed = prune_note(root, rel)
            if total is not None:
                total += _size(kept_now) - freed
            if total is None or total > MAX_TOTAL_BYTES:
                total = _prune_all(root, KEEP_PER_NOTE, MAX_TOTAL_BYTES, kept_now)[1]
            _write_usage(base, total)
    except (OSError, Forbidden, InvalidInput, Unavailable) as exc:
        log.warn("history_prune_failed", error=type(exc).__name__)


def _read_usage(base: Path) -> int | None:
    """The running count of the history's bytes, or None when missing, unreadable or too
    old to trust."""
    try:
        raw = (base / USAGE).read_text(encoding="ascii").split()
        total, at = int(raw[0]), float(raw[1])
    except (OSError, ValueError, IndexError):
        return None
    if total < 0 or not 0 <= time.time() - at < USAGE_FRESH_SECONDS:
        return None
    return total


def _write_usage(base: Path, total: int) -> None:
    """The count, replaced in one rename (a reader never sees half of it)."""
    os.makedirs(base, mode=0o700, exist_ok=True)
    tmp = base / f"{USAGE}.{os.getpid()}.tmp"
    tmp.write_text(f"{total} {time.time():.3f}\n", encoding="ascii")
    os.replace(tmp, base / USAGE)


def _size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _drop(path: Path) -> int:
    size = _size(path)
    return size if _unlink(path) else 0


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
