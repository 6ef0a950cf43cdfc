"""`python -m vault_brain.server --stdio|--http --vault PATH`: the server without the CLI.

Kept small and dependency-free so MCP client configs and tests can spawn it directly.
"""

from __future__ import annotations

import argparse
import sys

from vault_brain.config import load_settings
from vault_brain.errors import ConfigError, VaultBrainError
from vault_brain.server import run_http, run_stdio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vault_brain.server")
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true")
    transport.add_argument("--http", action="store_true")
    parser.add_argument("--vault")
    parser.add_argument("--config")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    server = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    try:
        settings = load_settings(
            vault=args.vault, config_file=args.config, overrides={"server": server}
        )
        if args.http:
            run_http(settings)
        else:
            run_stdio(settings)
    except ConfigError as exc:
        sys.stderr.write(f"vault-brain: {exc.message}\n")
        return 2
    except VaultBrainError as exc:  # e.g. the port is in use
        sys.stderr.write(f"vault-brain: {exc.message}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
