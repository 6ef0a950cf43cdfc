"""MCP server: six memory tools over stdio and Streamable HTTP, calling only service.Brain.

The CLI's `serve` calls `run_stdio(settings)` or `run_http(settings)`; imports are lazy so
`import vault_brain.server` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vault_brain.config import Settings


def run_stdio(settings: Settings, **options: Any) -> None:
    """Serve on stdin/stdout until the client hangs up (blocks)."""
    from vault_brain.server.stdio import run_stdio as run

    run(settings, **options)


def run_http(settings: Settings, **options: Any) -> None:
    """Serve Streamable HTTP on settings.server.host:port (blocks).

    Raises vault_brain.errors.ConfigError (exit 2) for a non-loopback bind without a token.
    """
    from vault_brain.server.http import run_http as run

    run(settings, **options)
