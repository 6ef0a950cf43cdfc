"""Opening the index that `index.url` names: the one place that knows which backends exist.

A location with a scheme (`postgresql://host/db`) names a server and picks the backend
registered for its scheme; anything else is a path to a SQLite file. A new backend is a
package under index/ with an `open_index(settings, *, one_shot)` and one line below.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vault_brain.config import Settings, is_server_url
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.index.port import Index

FILE_BACKEND = "vault_brain.index.sqlite"
# A server URL's scheme -> the package that opens it.
SERVER_BACKENDS: dict[str, str] = dict.fromkeys(
    ("postgresql", "postgres"), "vault_brain.index.postgres"
)


def backend_of(location: str) -> str:
    """The package that opens `location` (a file path or a server URL)."""
    if not is_server_url(location):
        return FILE_BACKEND
    scheme = location.split("://", 1)[0].lower()
    try:
        return SERVER_BACKENDS[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in sorted(SERVER_BACKENDS)) or "none in this install"
        raise ConfigError(
            [
                f"index.url: no index backend for {scheme}:// (servers known: {known}); "
                "give a file path for a SQLite index"
            ]
        ) from None


def open_index(settings: Settings, *, one_shot: bool = False) -> Index:
    """The vault's index in the store its settings name. `one_shot`: this process answers
    one command and exits (the CLI), so the backend may skip what only pays off over many
    searches (SQLite: the in-memory vector matrix)."""
    backend = import_module(backend_of(settings.index_location))
    return backend.open_index(settings, one_shot=one_shot)


def open_reader(settings: Settings) -> Any:
    """Reads of the vault's index as it is, for a process forked before its parent opened
    the index (oneshot.py): `.read()` as Index.read() on connections of its own; nothing
    made, moved, upgraded or written. Unavailable where the index is not there yet, is of
    another schema, or its backend offers no such reader (a server's)."""
    backend = import_module(backend_of(settings.index_location))
    opener = getattr(backend, "open_reader", None)
    if opener is None:
        raise Unavailable("this index backend has no reader for a forked process")
    return opener(settings)
