"""MCP over Streamable HTTP (Open WebUI, shared servers): bearer auth, /health, body cap.

Layers, outermost first: bearer auth on /mcp (a stranger learns nothing and sends nothing
we read), then the body cap, then Starlette with /health and the SDK's /mcp endpoint.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.errors import ConfigError
from vault_brain.server.app import BrainHandle, make_server, route_library_logs

if TYPE_CHECKING:
    from vault_brain.service import Brain

MCP_PATH = "/mcp"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings) -> None:
    """Anyone on the network could read and write the vault: a non-loopback bind needs a token."""
    host = settings.server.host
    if not is_loopback(host) and not settings.server.token:
        raise ConfigError(
            [
                f"server.host: binding to {host} exposes the vault beyond this machine; "
                "set a token (VAULT_BRAIN_TOKEN or server.token) or bind to 127.0.0.1"
            ]
        )


class BearerAuth:
    """`Authorization: Bearer <token>` on /mcp, compared in constant time."""

    def __init__(self, app: ASGIApp, token: str, path: str = MCP_PATH) -> None:
        self.app = app
        self.token = token.encode()
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.token or not _under(scope["path"], self.path):
            await self.app(scope, receive, send)
            return
        scheme, _, value = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token):
            await self.app(scope, receive, send)
            return
        log.warn("http_unauthorized", path=scope["path"])
        response = JSONResponse(
            {
                "code": "UNAUTHORIZED",
                "message": "missing or wrong bearer token",
                "retryable": False,
            },
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="vault-brain"'},
        )
        await response(scope, receive, send)


class BodyLimit:
    """413 for bodies over the cap: by Content-Length up front, and by counting what arrives
    (chunked uploads have no Content-Length). The body is buffered, then replayed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        replay: deque[Message] = deque()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                replay.append(message)
                break
            body.extend(message.get("body", b""))
            if len(body) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replay.appendleft({"type": "http.request", "body": bytes(body), "more_body": False})

        async def replayed() -> Message:
            return replay.popleft() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        log.warn("http_body_too_large", path=scope["path"], max_bytes=self.max_bytes)
        response = JSONResponse(
            {
                "code": "INVALID_INPUT",
                "message": f"request body over {self.max_bytes} bytes",
                "retryable": False,
            },
            status_code=413,
        )
        await response(scope, receive, send)


def build_app(settings: Settings, handle: BrainHandle) -> ASGIApp:
    """The ASGI app: /mcp (Streamable HTTP, token-guarded) and /health (open)."""
    server = make_server(settings, handle)
    # Creates the session manager; host= keeps the SDK's Host allow-list in step with the bind.
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.server.host,
        max_request_body_size=settings.server.max_body_bytes,
    )
    session_manager = server.session_manager

    async def health(request: Request) -> JSONResponse:
        brain = handle.peek()
        if brain is None:
            status = "error" if handle.failed else "starting"
            return JSONResponse({"status": status}, status_code=503)
        st = await anyio.to_thread.run_sync(brain.status)
        return JSONResponse(
            {
                "status": "degraded" if st.last_error else "ok",
                "notes": st.notes,
                "chunks": st.chunks,
                "pending_vectors": st.pending_vectors,
                "pending_summaries": st.pending_summaries,
                "embedding": st.embedding,
                "dimension": st.dimension,
                "summary_model": st.summary_model,
                "last_error": st.last_error,
                "indexer": st.indexer,
                "indexing": (
                    {"done": st.indexing.done, "total": st.indexing.total} if st.indexing else None
                ),
            }
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        handle.start()
        try:
            async with session_manager.run():
                yield
        finally:
            await anyio.to_thread.run_sync(handle.close)

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route(MCP_PATH, StreamableHTTPASGIApp(session_manager)),
        ],
        lifespan=lifespan,
    )
    return BearerAuth(BodyLimit(app, settings.server.max_body_bytes), settings.server.token)


def make_uvicorn(settings: Settings, handle: BrainHandle, *, port: int | None = None) -> Any:
    """A uvicorn.Server, not yet started (tests and benchmarks run it on port 0 in a thread)."""
    import uvicorn

    config = uvicorn.Config(
        build_app(settings, handle),
        host=settings.server.host,
        port=settings.server.port if port is None else port,
        log_config=None,
        access_log=False,
        lifespan="on",
    )
    return uvicorn.Server(config)


def run_http(
    settings: Settings,
    *,
    factory: Callable[[Settings], Brain] | None = None,
    attach: Callable[[Brain], Callable[[], object] | None] | None = None,
) -> None:
    """Serve MCP over HTTP until interrupted. Blocks. Raises ConfigError on an unsafe bind."""
    check_bind(settings)
    route_library_logs()
    handle = BrainHandle(settings, factory=factory, attach=attach)
    log.event(
        "serve",
        transport="http",
        host=settings.server.host,
        port=settings.server.port,
        auth=bool(settings.server.token),
        read_only=settings.write.read_only,
    )
    make_uvicorn(settings, handle).run()


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")
