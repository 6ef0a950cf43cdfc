"""The SQLite backend of the index port: one file (`index.db`, FTS5 full text, sqlite-vec
vectors) in the vault's folder of the user's cache (place.py), its WAL, and an flock that
names the vault's indexer.

index/factory.py opens it for an `index.url` that is a path (or `index.path`, its older
name); nothing outside index/ imports this package."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vault_brain.config import Settings
    from vault_brain.index.sqlite.db import ForkedReader, SqliteIndex


def open_index(settings: Settings, *, one_shot: bool = False) -> SqliteIndex:
    """The index file `settings.index_path` names (made and filled with the schema when
    there is none; an index an earlier version kept in the vault is moved there)."""
    from vault_brain.index.sqlite.db import SqliteIndex
    from vault_brain.index.sqlite.place import mark_folder, move_vault_index

    path = settings.index_path
    if path is None:
        raise ValueError("the SQLite backend needs a file path, not a server URL")
    if settings.index_is_default:
        mark_folder(path.parent, settings.vault_path)
    move_vault_index(settings.vault_index_path, path)
    return SqliteIndex(path, one_shot=one_shot)


def open_reader(settings: Settings) -> ForkedReader:
    """Reads of the index file as it is (index/factory.py open_reader)."""
    from vault_brain.index.sqlite.db import ForkedReader

    path = settings.index_path
    if path is None:
        raise ValueError("the SQLite backend needs a file path, not a server URL")
    return ForkedReader(path)
