"""MCP over Streamable HTTP (Open WebUI, shared servers): bearer auth, /health, body cap.

Layers, outermost first: the Host/Origin check (a web page that points its own name at a
loopback address gets nothing: DNS rebinding), bearer auth on /mcp (a stranger learns
nothing and sends nothing we read), then the body cap, then Starlette with /health and the
SDK's /mcp endpoint.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import socket
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vault_brain import log
from vault_brain.config import Settings, is_loopback
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.server import tools
from vault_brain.server.app import BrainHandle, make_server, route_library_logs
from vault_brain.server.health import health_body
from vault_brain.server.metrics import CONTENT_TYPE as METRICS_TYPE
from vault_brain.server.metrics import Metrics

if TYPE_CHECKING:
    from vault_brain.service import Brain

MCP_PATH = "/mcp"


def check_bind(settings: Settings) -> None:
    """Anyone on the network could read and write the vault: a non-loopback bind needs a token.
    Also refuses allowed_hosts / allowed_origins entries that could never match."""
    host = settings.server.host
    problems = []
    if not is_loopback(host) and not settings.server.token:
        problems.append(
            f"server.host: binding to {host} exposes the vault beyond this machine; "
            "set a token (VAULT_BRAIN_TOKEN or server.token) or bind to 127.0.0.1"
        )
    for entry in settings.server.allowed_hosts:
        if entry != "*" and split_host(entry) is None:
            problems.append(
                f"server.allowed_hosts: {entry!r} is not a host as clients send it in the Host "
                "header (name, name:port or name:*, e.g. vault.example.com)"
            )
    for entry in settings.server.allowed_origins:
        if entry != "*" and _split_origin(entry) is None:
            problems.append(
                f"server.allowed_origins: {entry!r} is not an origin "
                "(scheme://name[:port], e.g. https://chat.example.com)"
            )
    if problems:
        raise ConfigError(problems)


# ---- Host and Origin (DNS rebinding) ----

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
ANY_PORT: Final = -1  # a rule that matches every port
SERVER_PORT: Final = -2  # a rule that matches the port this server listens on
DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _name(host: str) -> str:
    """Host names compare case-insensitively without a trailing dot; IP literals in one
    spelling (0:0:0:0:0:0:0:1 is ::1)."""
    host = host.strip().rstrip(".").lower()
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def split_host(value: str) -> tuple[str, int | None] | None:
    """`name`, `name:port`, `[v6]:port`, `name:*` (or a bare IPv6 literal in a config entry)
    -> (normalised name, port, ANY_PORT, or None when absent); None when malformed."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    else:
        name, port_text = value, None
    if not name:
        return None
    if port_text is None:
        return _name(name), None
    if port_text == "*":
        return _name(name), ANY_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return _name(name), int(port_text)


@dataclass(frozen=True)
class HostPolicy:
    """Which Host and Origin headers a request may carry; None means the check is off.

    Host rules are (name, port); origin rules are (scheme, name, port). A port may be
    ANY_PORT or SERVER_PORT (the port the request came in on, known only per request).
    """

    hosts: tuple[tuple[str, int], ...] | None
    origins: tuple[tuple[str, str, int], ...] | None


def host_policy(settings: Settings) -> HostPolicy:
    """On a loopback bind, Host must name a loopback name or the bind address on this
    server's port, and Origin (when a browser sends one) a page on this machine: that is
    what stops DNS rebinding. `server.allowed_hosts` / `allowed_origins` add names (a reverse
    proxy, a Docker network); "*" turns a check off. Beyond loopback the bearer token is the
    guard and the names people use are unknowable, so each check is on only when its list
    is set."""
    server = settings.server
    loopback = is_loopback(server.host)
    names = list(LOOPBACK_NAMES)
    bind = _name(server.host.strip("[]"))
    if bind not in names and bind not in ("0.0.0.0", "::"):
        names.append(bind)

    hosts: tuple[tuple[str, int], ...] | None = None
    if "*" not in server.allowed_hosts and (loopback or server.allowed_hosts):
        rules = [(n, SERVER_PORT) for n in names]
        for entry in server.allowed_hosts:
            parsed = split_host(entry)
            if parsed is not None:  # config validation has refused the malformed ones
                rules.append((parsed[0], ANY_PORT if parsed[1] is None else parsed[1]))
        hosts = tuple(rules)

    origins: tuple[tuple[str, str, int], ...] | None = None
    if "*" not in server.allowed_origins and (loopback or server.allowed_origins):
        found = [(scheme, n, ANY_PORT) for n in names for scheme in ("http", "https")]
        for entry in server.allowed_origins:
            parsed_origin = _split_origin(entry)
            if parsed_origin is not None:
                found.append(parsed_origin)
        origins = tuple(found)
    return HostPolicy(hosts, origins)


def _split_origin(value: str) -> tuple[str, str, int] | None:
    scheme, sep, rest = value.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in DEFAULT_PORTS:
        return None
    parsed = split_host(rest.rstrip("/"))
    if parsed is None:
        return None
    name, port = parsed
    return scheme, name, DEFAULT_PORTS[scheme] if port is None else port


def _port_matches(rule: int, port: int, server_port: int | None) -> bool:
    return rule == ANY_PORT or rule == port or (rule == SERVER_PORT and port == server_port)


def host_allowed(
    policy: HostPolicy, host: str | None, scheme: str, server_port: int | None
) -> bool:
    if policy.hosts is None:
        return True
    parsed = split_host(host) if host else None
    if parsed is None or parsed[1] == ANY_PORT:
        return False
    name, port = parsed
    port = DEFAULT_PORTS.get(scheme, 80) if port is None else port
    return any(n == name and _port_matches(p, port, server_port) for n, p in policy.hosts)


def origin_allowed(policy: HostPolicy, origin: str | None, server_port: int | None) -> bool:
    if policy.origins is None or origin is None:
        return True  # no Origin: not a browser, or a same-origin navigation
    parsed = _split_origin(origin)
    if parsed is None or parsed[2] == ANY_PORT:
        return False  # "null" (sandboxed pages, file://) and anything unparsable
    scheme, name, port = parsed
    return any(
        s == scheme and n == name and _port_matches(p, port, server_port)
        for s, n, p in policy.origins
    )


class HostGuard:
    """421 for a Host this server does not answer to, 403 for a foreign Origin, on every
    path (/health too): the one DNS-rebinding rule, see host_policy."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        server_port = (scope.get("server") or (None, None))[1]
        host = headers.get("host")
        if not host_allowed(self.policy, host, scope.get("scheme", "http"), server_port):
            shown = log.cut(host or "", 80)
            log.warn("http_host_refused", host=shown, path=scope["path"])
            await self._refuse(
                421,
                f"this server does not answer to Host {shown!r}; if clients reach it through "
                "a reverse proxy or a Docker network, add that name to server.allowed_hosts",
                scope,
                receive,
                send,
            )
            return
        origin = headers.get("origin")
        if not origin_allowed(self.policy, origin, server_port):
            shown = log.cut(origin or "", 80)
            log.warn("http_origin_refused", origin=shown, path=scope["path"])
            await self._refuse(
                403,
                f"requests from pages at {shown!r} are refused; to let a web client in, "
                "add its origin to server.allowed_origins",
                scope,
                receive,
                send,
            )
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(status: int, message: str, scope: Scope, receive: Receive, send: Send):
        body = {"code": "FORBIDDEN", "message": message, "retryable": False}
        await JSONResponse(body, status_code=status)(scope, receive, send)


OPEN_PATHS: Final = ("/health",)  # what answers without the token
# OAuth discovery (RFC 8414, RFC 9728, OpenID): answered 404 without the token, see oauth_probe.
DISCOVERY_PREFIX: Final = "/.well-known/"
NO_OAUTH: Final = (
    "vault-brain does not use OAuth: send the header 'Authorization: Bearer <token>' with "
    "the token the server was started with (VAULT_BRAIN_TOKEN or server.token)"
)
REFUSALS: Final = {
    "missing": "no bearer token was sent",
    "not_bearer": "the Authorization header is not 'Bearer <token>'",
    "wrong": "the bearer token is not this server's",
}


class BearerAuth:
    """`Authorization: Bearer <token>` on every path but /health and OAuth discovery,
    compared in constant time.

    A refusal is a 401 that clients can explain: `WWW-Authenticate: Bearer
    error="invalid_token", error_description=...` (RFC 6750; the error code is given even
    when no token came, where the RFC would leave it out, so clients show the description)
    and a JSON-RPC error body, which the mcp client raises with its message. Clients that
    hold an OAuth provider (Claude Code, the SDKs' OAuth clients) answer any 401 by trying
    OAuth: discovery finds nothing here (404) and the registration they then POST gets this
    same 401, whose body both print ("Dynamic Client Registration rejected (HTTP 401): ...").
    The log says why (missing, not bearer, wrong), never the token."""

    def __init__(
        self, app: ASGIApp, token: str, on_refusal: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.token = token.encode()
        self.on_refusal = on_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or not self.token
            or path in OPEN_PATHS
            or path.startswith(DISCOVERY_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        scheme, _, value = (header or "").partition(" ")
        if header is None or not header.strip():
            reason = "missing"
        elif scheme.lower() != "bearer":
            reason = "not_bearer"
        elif hmac.compare_digest(value.strip().encode(), self.token):
            await self.app(scope, receive, send)
            return
        else:
            reason = "wrong"
        log.warn("http_unauthorized", path=log.cut(path, 80), reason=reason)
        if self.on_refusal is not None:
            self.on_refusal(reason)
        message = f"{REFUSALS[reason]}; {NO_OAUTH}"
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": UNAUTHORIZED_CODE,
                "message": message,
                "data": {"code": "UNAUTHORIZED", "retryable": False},
            },
        }
        challenge = (
            f'Bearer realm="vault-brain", error="invalid_token", error_description="{message}"'
        )
        await JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})(
            scope, receive, send
        )


# JSON-RPC has no code for "unauthorized"; -32001 is the one MCP servers commonly send.
UNAUTHORIZED_CODE: Final = -32001


async def oauth_probe(request: Request) -> JSONResponse:
    """/.well-known/* : 404, saying why. A client got a 401 and is looking for an OAuth
    server; there is none, and the log says the client was not given the token."""
    log.warn("http_oauth_discovery", path=log.cut(request.url.path, 80))
    return JSONResponse(
        {"error": "not_found", "error_description": NO_OAUTH},
        status_code=404,
    )


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
                return  # the client left (or was cut off) before its body was complete
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
    """The ASGI app: /mcp (Streamable HTTP) and /metrics behind the token; /health open."""
    metrics = Metrics(tuple(tools.BY_NAME))
    server = make_server(settings, handle, metrics)
    # Creates the session manager. The SDK's own Host/Origin check is off on purpose: it
    # switches itself on only for three spellings of loopback and knows nothing of
    # server.allowed_hosts, so HostGuard (outermost, every path) is the one rule.
    # Each POST is answered with one JSON body rather than an SSE stream: the tools send no
    # progress, sampling or log messages that the stream would carry, and per the spec
    # every client accepts both.
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        host=settings.server.host,
        max_request_body_size=settings.server.max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    session_manager = server.session_manager

    async def health(request: Request) -> JSONResponse:
        brain = handle.peek()
        if brain is None:
            status = "error" if handle.failed else "starting"
            return JSONResponse({"status": status}, status_code=503)
        st = await anyio.to_thread.run_sync(brain.status)
        return JSONResponse(health_body(st))

    async def metrics_text(request: Request) -> Response:
        brain = handle.peek()
        st = None if brain is None else await anyio.to_thread.run_sync(brain.status)
        return Response(metrics.render(st), media_type=METRICS_TYPE)

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
            Route("/metrics", metrics_text, methods=["GET"]),
            Route(DISCOVERY_PREFIX + "{rest:path}", oauth_probe),
            Route(MCP_PATH, StreamableHTTPASGIApp(session_manager)),
        ],
        lifespan=lifespan,
    )
    guarded = BearerAuth(
        BodyLimit(app, settings.server.max_body_bytes),
        settings.server.token,
        on_refusal=lambda reason: metrics.unauthorized.labels(reason).inc(),
    )
    return HostGuard(guarded, host_policy(settings))


# ---- slow clients ----

RESERVED_FDS = 64  # for the index (a few per SQLite connection), the watcher, logs


def connection_cap(configured: int) -> int:
    """server.max_connections, lowered to fit under the process's file-descriptor limit.

    asyncio accepts up to a whole listen backlog of sockets in one turn of the loop, before
    the protocol sees any of them (`accept_batch`), and the connections a full server pushes
    out release their descriptors turns later: at a peak, held + the accepts in flight +
    those being closed are open at once. So connections get a third of what the index and
    watcher leave free: 64 under macOS's default limit of 256."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return configured
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(8, min(configured, (soft - RESERVED_FDS) // 3))


def accept_batch(cap: int) -> int:
    """The listen backlog, which is also how many connections asyncio accepts in one turn
    of the loop: a quarter of the cap. With the backlog at the whole cap, a client opening
    connections as fast as it can kept several turns' accepts in flight (accepted, not yet
    seen by the protocol, so nothing pushed out for them yet) and a server limited to 256
    descriptors still met EMFILE now and then (1 CI run in ~8)."""
    return max(8, cap // 4)


def guarded_protocol(header_timeout: float, body_timeout: float, cap: int) -> type:
    """uvicorn's h11 protocol with read deadlines and a connection cap.

    uvicorn (0.54, h11) times out only an idle kept-alive connection, after a reply: a
    client that connects and sends nothing, or trickles its headers or its body a byte at a
    time, holds a connection (a file descriptor) forever, and a few hundred of them starve
    the process (issue 11, item 12; measured by bench/slow_clients.py). Here the request line
    and headers must arrive within `header_timeout` of the connection opening (or of the
    first byte of a later request on it), the body within `body_timeout` of the headers;
    replies, however long they stream, are not limited. Beyond `cap` open connections a new
    one pushes out the oldest that is not in the middle of a request, else it is refused.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    refusal = (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n"
        b"connection: close\r\nretry-after: 1\r\n\r\n"
    )

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _phase = ""  # "header" | "body" | "" (not reading a request)
        _since = 0.0  # when the current phase (or the idle time after a reply) began

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._since = self.loop.time()
            if len(self.connections) > cap and not self._make_room():
                log.warn("http_connection_refused", reason="connection cap", cap=cap)
                transport.write(refusal)
                transport.close()
                return
            self._arm("header", header_timeout)

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self.conn.their_state is h11.IDLE:
                self._arm("header", header_timeout)  # a later request on a kept-alive connection
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            self._since = self.loop.time()
            super().on_response_complete()
            self._follow()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _follow(self) -> None:
            """Move the deadline along with the request: headers, then body, then none."""
            state = self.conn.their_state
            if state is h11.IDLE:
                return
            if state is h11.SEND_BODY:
                if self._phase != "body":
                    self._arm("body", body_timeout)
                return
            self._disarm()  # the whole request is in, or the connection is ending

        def _arm(self, phase: str, seconds: float) -> None:
            self._disarm()
            self._phase = phase
            self._since = self.loop.time()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._phase = ""

        def _expired(self) -> None:
            phase, self._deadline = self._phase, None
            if not self.transport.is_closing():
                log.warn("http_slow_client_closed", phase=phase)
                self._disarm()
                self.transport.close()

        def _replying(self) -> bool:
            cycle = self.cycle
            return cycle is not None and cycle.response_started and not cycle.response_complete

        def _make_room(self) -> bool:
            """Close the oldest connection that is not being answered: first those between
            requests or still sending headers, then those still sending a body. Replies in
            progress (tool calls, event streams) are never cut."""
            others = [
                p
                for p in self.connections
                if isinstance(p, GuardedH11Protocol)
                and p is not self
                and not p.transport.is_closing()
                and not p._replying()
            ]
            for state in (h11.IDLE, h11.SEND_BODY):
                candidates = [p for p in others if p.conn.their_state is state]
                if candidates:
                    victim = min(candidates, key=lambda p: p._since)
                    log.warn("http_connection_dropped", reason="connection cap", cap=cap)
                    victim._disarm()
                    victim.transport.close()
                    return True
            return False

    return GuardedH11Protocol


def make_uvicorn(settings: Settings, handle: BrainHandle, *, port: int | None = None) -> Any:
    """A uvicorn.Server, not yet started (tests and benchmarks run it on port 0 in a thread)."""
    import uvicorn

    server = settings.server
    cap = connection_cap(server.max_connections)
    config = uvicorn.Config(
        build_app(settings, handle),
        host=server.host,
        port=server.port if port is None else port,
        http=guarded_protocol(server.header_timeout_seconds, server.body_timeout_seconds, cap),
        backlog=accept_batch(cap),
        log_config=None,
        access_log=False,
        lifespan="on",
    )
    return uvicorn.Server(config)


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for host:port, bound before anything else starts. A port in use is
    then one clear error (exit 1) with nothing opened; uvicorn itself would open the index
    and take the indexer lock first, then log the OSError and exit with code 3.

    Every address the host resolves to is bound (localhost: 127.0.0.1 and ::1), as uvicorn
    does; port 0 binds the first one only (each would get a different port).
    """
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise Unavailable(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if sys.platform != "win32":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise Unavailable(_bind_problem(host, port, exc)) from None
            if port == 0:
                break
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bind_problem(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}" if ":" not in host.strip("[]") else f"[{host.strip('[]')}]:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the port is already in use (another vault-brain "
            "serve --http, or another program); choose another with --port or server.port"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need privileges)"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def run_http(
    settings: Settings,
    *,
    factory: Callable[[Settings], Brain] | None = None,
    attach: Callable[[Brain], Callable[[], object] | None] | None = None,
) -> None:
    """Serve MCP over HTTP until interrupted. Blocks. Raises ConfigError on an unsafe bind,
    Unavailable when the address cannot be listened on (a port in use)."""
    check_bind(settings)
    sockets = bind_sockets(settings.server.host, settings.server.port)
    route_library_logs()
    handle = BrainHandle(settings, factory=factory, attach=attach)
    server = make_uvicorn(settings, handle)
    for sock in sockets:
        # Listening before the announcement: a client that connects at once waits in the
        # backlog until uvicorn accepts, instead of being refused.
        sock.listen(server.config.backlog)
    port = sockets[0].getsockname()[1]
    log.event(
        "serve",
        transport="http",
        host=settings.server.host,
        port=port,
        auth=bool(settings.server.token),
        read_only=settings.write.read_only,
    )
    sys.stderr.write("".join(f"vault-brain: {line}\n" for line in announcement(settings, port)))
    sys.stderr.flush()
    server.run(sockets=sockets)


def announcement(settings: Settings, port: int) -> list[str]:
    """What a person starting `serve --http` needs to paste: the URL, and how clients pass
    the token (never the token itself)."""
    host = settings.server.host.strip("[]")
    wildcard = host in ("0.0.0.0", "::", "")
    shown = socket.gethostname() if wildcard else host
    url = f"http://{_url_host(shown)}:{port}{MCP_PATH}"
    lines = [f"serving MCP at {url}"]
    if wildcard:
        lines[0] += (
            f" (every address of this machine; from this one: http://127.0.0.1:{port}{MCP_PATH})"
        )
    if settings.server.token:
        lines.append(
            'clients send the header "Authorization: Bearer <token>" with the token from '
            "VAULT_BRAIN_TOKEN or server.token, e.g. claude mcp add --transport http "
            f'vault-brain-http {url} --header "Authorization: Bearer $VAULT_BRAIN_TOKEN"'
        )
    else:
        lines.append(
            "no token is set, so clients need none; only this machine can connect (loopback)"
        )
    return lines


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
