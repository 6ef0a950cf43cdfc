"""MCP over stdio: what Claude Desktop, Claude Code and Cursor spawn.

stdout carries the protocol and nothing else: our logs go to stderr, and the SDK's stdio
transport diverts file descriptor 1 while it runs, so even a stray print cannot corrupt it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.server.app import BrainHandle, make_server, route_library_logs

if TYPE_CHECKING:
    from vault_brain.service import Brain

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
ID_MAX = 256  # longer ids are not echoed back


class _TooLong:
    """Stands in for a number with more digits than Python will convert (4,300)."""


def _parse_int(text: str) -> int | _TooLong:
    return int(text) if len(text) <= 4000 else _TooLong()


def _walk(value: Any) -> Any:
    """Every scalar inside a parsed JSON value (keys included)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
    else:
        yield value


def _whole_message(exc: Exception) -> Any:
    """What the SDK failed to validate: the raw line when it was not JSON to pydantic, else
    the parsed message (the largest object among the validation errors' inputs: for a
    union of message types, some branch always reports on the whole object)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        found = errors()
    except Exception:  # noqa: BLE001 - not a pydantic error after all
        return None
    objects = []
    for error in found:
        value = error.get("input")
        if error.get("type") == "json_invalid" and isinstance(value, str):
            return value
        if isinstance(value, (dict, list)):
            objects.append(value)
    return max(objects, key=len, default=None)


def malformed_reply(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a line the SDK could not take, or None for a notification or
    a response (JSON-RPC answers neither). The request's id is kept when it can be read."""
    message = _whole_message(exc)
    if isinstance(message, str):
        try:
            message = json.loads(message, parse_int=_parse_int)
        except ValueError:
            return _error(None, PARSE_ERROR, "Parse error: the line is not JSON")
    if message is None:
        return _error(None, PARSE_ERROR, "Parse error: the line could not be read")
    request_id = None
    if isinstance(message, dict):
        if "id" not in message and "method" in message:
            return None  # a notification
        if "method" not in message and ("result" in message or "error" in message):
            return None  # a (malformed) response to one of our requests
        raw_id = message.get("id")
        if (isinstance(raw_id, int) and not isinstance(raw_id, bool)) or (
            isinstance(raw_id, str) and len(raw_id) <= ID_MAX and not LONE_SURROGATE.search(raw_id)
        ):
            request_id = raw_id
    scalars = list(_walk(message))
    if any(isinstance(v, str) and LONE_SURROGATE.search(v) for v in scalars):
        return _error(
            request_id,
            INVALID_PARAMS,
            "Invalid params: text in the request is not valid Unicode (a lone surrogate such "
            "as \\ud800); send UTF-8, or escape characters outside the BMP as surrogate pairs",
        )
    if any(isinstance(v, _TooLong) for v in scalars):
        return _error(request_id, INVALID_PARAMS, "Invalid params: a number is too long")
    return _error(request_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")


def _error(request_id: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


class AnswerMalformed:
    """The read stream the server sees, with a reply for every line the SDK cannot take.

    The SDK's stdin reader turns a line that fails validation (a lone surrogate `"\\ud800"`,
    invalid UTF-8, a number too long for pydantic, JSON that is no JSON-RPC message) into an
    exception on the read stream, and the server drops it silently: the client then waits
    for a reply that never comes. Here each one is answered with a JSON-RPC error instead.
    """

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context from here
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = malformed_reply(item)
            log.warn(
                "stdio_malformed_message",
                reply=None if reply is None else reply.error.code,
                answered_id=reply is not None and reply.id is not None,
            )
            if reply is not None:
                await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnswerMalformed:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnswerMalformed:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def serve_stdio(settings: Settings, handle: BrainHandle) -> None:
    server = make_server(settings, handle)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(
            AnswerMalformed(read_stream, write_stream),
            write_stream,
            server.create_initialization_options(),
        )


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
