"""MCP over stdio: what Claude Desktop, Claude Code and Cursor spawn.

stdout carries the protocol and nothing else: our logs go to stderr, and the SDK's stdio
transport diverts file descriptor 1 while it runs, so even a stray print cannot corrupt it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from mcp.server.stdio import stdio_server

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.server.app import BrainHandle, make_server, route_library_logs

if TYPE_CHECKING:
    from vault_brain.service import Brain


async def serve_stdio(settings: Settings, handle: BrainHandle) -> None:
    server = make_server(settings, handle)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(
    settings: Settings,
    *,
    factory: Callable[[Settings], Brain] | None = None,
    attach: Callable[[Brain], Callable[[], object] | None] | None = None,
) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin. Blocks."""
    route_library_logs()
    handle = BrainHandle(settings, factory=factory, attach=attach)
    handle.start()
    log.event("serve", transport="stdio", read_only=settings.write.read_only)
    try:
        anyio.run(serve_stdio, settings, handle)
    finally:
        handle.close()
