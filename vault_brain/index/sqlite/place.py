"""Where a SQLite index lives: by default the vault's own folder in the user's cache
(config.Settings.default_index_path), never inside the vault.

People sync their vault (iCloud, Dropbox, Syncthing, git). A sync tool that copies a live
SQLite file and its WAL mid-write hands the other device a damaged database, and every
device uploads the same rebuildable index. So the index, its WAL and its lock sit in
`<user cache>/vault-brain/indexes/<vault>-<hash>/` beside a small `vault.txt` that names
the vault; the vault's `.vault-brain/` keeps the vault's own config and its note history.

An index that an earlier version kept in `<vault>/.vault-brain/` is moved out once, not
rebuilt: it is disposable, but its vectors cost minutes to an hour of the strong model.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vault_brain import log
from vault_brain.config import VAULT_MARKER
from vault_brain.index.sqlite.db import binding_errors, connect
from vault_brain.index.sqlite.lock import LOCK_NAME, IndexerLock

SIDE_FILES = ("-wal", "-shm", "-journal")


def mark_folder(folder: Path, vault: Path) -> None:
    """Make the vault's index folder and say in it which vault it belongs to (for a person
    cleaning their cache: the folder's name alone is the vault's name and a hash)."""
    marker = folder / VAULT_MARKER
    text = f"{vault}\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if marker.is_file() and marker.read_text(encoding="utf-8") == text:
            return
        marker.write_text(text, encoding="utf-8")
    except OSError as exc:  # the index itself says plainly if the folder is unusable
        log.warn("index_marker_unwritten", path=str(marker), error=type(exc).__name__)


def move_vault_index(old: Path, new: Path) -> bool:
    """Move the index an earlier version kept inside the vault (`old`) to `new`, with its
    WAL copied in first. Only a plain file (never a link), only when `new` holds no index
    yet, and only while no process has the old one as its indexer (its lock is free): else
    the old files stay where they are and the new index is built from the notes. True
    when it moved."""
    if old == new or new.exists():
        return False
    try:
        if not stat.S_ISREG(os.lstat(old).st_mode):
            return False
    except OSError:
        return False
    lock = IndexerLock(old.parent / LOCK_NAME)
    if not lock.try_acquire():
        log.warn("index_in_vault_busy", path=str(old))
        return False
    try:
        conn = connect(old)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        new.parent.mkdir(parents=True, exist_ok=True)
        moving = new.with_name(new.name + ".moving")
        import shutil  # rarely: only an index moved from its old place

        shutil.move(old, moving)  # a rename on one file system, else a copy
        os.replace(moving, new)
        for suffix in SIDE_FILES:
            Path(f"{old}{suffix}").unlink(missing_ok=True)
    except (OSError, *binding_errors()) as exc:
        log.warn("index_move_failed", path=str(old), error=str(exc)[:200])
        return False
    finally:
        lock.release()
    (old.parent / LOCK_NAME).unlink(missing_ok=True)
    log.event("index_moved", src=str(old), dst=str(new))
    return True
