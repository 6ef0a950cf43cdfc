"""The MCP server object shared by both transports: tool dispatch, error mapping, call logs.

Built on the SDK's low-level `Server` rather than `MCPServer`: the tool specs are written by
hand (token budget, no output schemas) and every failure must come back as one
`{code, message, retryable}` payload with isError, which the low-level API makes direct.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    TextContent,
)

import vault_brain
from vault_brain import log
from vault_brain.config import Settings
from vault_brain.errors import Unavailable, VaultBrainError
from vault_brain.server import prompts, resources, tools
from vault_brain.server.metrics import Metrics

if TYPE_CHECKING:
    from vault_brain.service import Brain

T = TypeVar("T")

OPEN_WAIT_SECONDS = 30.0
# The first tool call waits at most this long for the first pass over a never-indexed vault
# (not at all when that pass is over thousands of files: Indexer.wait_until_indexed); after
# that, answers come from what is indexed and say `indexing: {done, total}`.
FIRST_INDEX_WAIT_SECONDS = 10.0


def _default_factory(settings: Settings) -> Brain:
    from vault_brain.service import Brain

    return Brain(settings)


def _default_attach(brain: Brain) -> Callable[[], object]:
    return brain.start_watching()


class BrainHandle:
    """Opens Brain in the background so `initialize` is answered at once on any vault size.

    Tool calls wait (in a worker thread) until it is open. Then `attach(brain)` runs; by
    default it starts the watcher (indexer or reader role: one indexer per vault), whose
    first act is a stat-pass reconcile, and returns its stop function. Tools answer from the
    index meanwhile.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        factory: Callable[[Settings], Brain] | None = None,
        attach: Callable[[Brain], Callable[[], object] | None] | None = None,
    ) -> None:
        self._settings = settings
        self._factory = factory or _default_factory
        self._attach = attach if attach is not None else _default_attach
        self._detach: Callable[[], object] | None = None
        self._brain: Brain | None = None
        self._error: BaseException | None = None
        self._opened = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._indexed = False  # the first tool calls wait (bounded) for a brand-new index

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._open, name="brain-open", daemon=True)
            self._thread.start()

    def _open(self) -> None:
        started = time.perf_counter()
        try:
            self._brain = self._factory(self._settings)
        except BaseException as exc:  # noqa: BLE001 - reported to every tool call instead
            self._error = exc
            log.warn("brain_open_failed", error=type(exc).__name__, where=_where(exc))
            return
        finally:
            self._opened.set()
        log.event("brain_open", ms=round((time.perf_counter() - started) * 1000, 1))
        if self._closed:
            return
        try:
            self._detach = self._attach(self._brain)
        except Exception as exc:  # noqa: BLE001 - tools keep answering from the index
            log.warn("background_start_failed", error=type(exc).__name__, where=_where(exc))

    def get(self, timeout: float = OPEN_WAIT_SECONDS) -> Brain:
        """The open Brain; blocks while it opens. Raises Unavailable when it cannot open."""
        self.start()
        if not self._opened.wait(timeout):
            raise Unavailable("the index is still opening; retry in a few seconds")
        if self._brain is None:
            if isinstance(self._error, VaultBrainError) and self._error.code == "UNAVAILABLE":
                raise self._error
            raise Unavailable(
                f"the index could not be opened ({type(self._error).__name__}); see the server log"
            )
        if not self._indexed:
            self._brain.wait_until_indexed(FIRST_INDEX_WAIT_SECONDS)
            self._indexed = True  # once: after that, answers come from whatever is indexed
        return self._brain

    def peek(self) -> Brain | None:
        """The Brain if it is open already, without waiting (for /health)."""
        return self._brain

    @property
    def failed(self) -> bool:
        return self._opened.is_set() and self._brain is None

    def close(self, wait: float = 1.0) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join(wait)
            if self._thread.is_alive():
                # A catch-up sync is still running on a big vault. The process is ending and
                # SQLite commits are atomic, so leave the connection to the OS rather than
                # closing it under the running sync.
                log.warn("close_during_background_sync")
                return
        if self._detach is not None:
            try:
                self._detach()
            except Exception as exc:  # noqa: BLE001 - shutting down anyway
                log.warn("background_stop_failed", error=type(exc).__name__)
        if self._brain is not None:
            try:
                self._brain.close()
            except Exception as exc:  # noqa: BLE001 - shutting down anyway
                log.warn("brain_close_failed", error=type(exc).__name__)


def error_payload(exc: BaseException) -> dict[str, Any]:
    """Our errors keep their code and details; anything else is INTERNAL with a generic text
    (the exception's own message could carry note text or paths)."""
    if isinstance(exc, VaultBrainError):
        return exc.to_dict()
    return {"code": "INTERNAL", "message": "internal error; see the server log", "retryable": False}


def call_tool(
    handle: BrainHandle,
    settings: Settings,
    name: str,
    arguments: Mapping[str, Any] | None,
    metrics: Metrics | None = None,
) -> CallToolResult:
    """One tool call, start to finish, synchronously (run it in a worker thread)."""
    started = time.perf_counter()
    fields: dict[str, Any] = {"tool": name}
    try:
        spec = tools.find_tool(name, settings)
        if spec.logged and isinstance((arguments or {}).get(spec.logged), str):
            fields["query"] = log.cut(arguments[spec.logged])  # type: ignore[index]
        args = tools.check_args(spec, arguments, settings)
        reply, count = spec.run(handle.get(), args)
    except Exception as exc:  # noqa: BLE001 - mapped to the one error shape
        payload = error_payload(exc)
        if not isinstance(exc, VaultBrainError):
            log.warn("tool_internal_error", tool=name, error=type(exc).__name__, where=_where(exc))
        log.event("tool", **fields, latency_ms=_ms(started), results=0, error=payload["code"])
        if metrics is not None:
            metrics.tool_call(name, time.perf_counter() - started, str(payload["code"]))
        return CallToolResult(content=[TextContent(text=tools.dumps(payload))], is_error=True)
    log.event("tool", **fields, latency_ms=_ms(started), results=count)
    if metrics is not None:
        metrics.tool_call(name, time.perf_counter() - started)
    return CallToolResult(content=[TextContent(text=tools.dumps(reply))])


def answer(kind: str, what: str, work: Callable[[], T]) -> T:
    """A resource or prompt request, start to finish (in a worker thread): our errors become
    one JSON-RPC error whose data is the usual {code, message, retryable}; one log line."""
    started = time.perf_counter()
    try:
        result = work()
    except Exception as exc:  # noqa: BLE001 - mapped to the one error shape
        payload = error_payload(exc)
        if not isinstance(exc, VaultBrainError):
            log.warn(f"{kind}_internal_error", error=type(exc).__name__, where=_where(exc))
        log.event(kind, what=what, latency_ms=_ms(started), error=payload["code"])
        # A wrong URI or argument is the client's to fix (INVALID_PARAMS, as the SDK's own
        # MCPServer answers an unknown resource); anything else is ours.
        code = INVALID_PARAMS if payload["code"] in CLIENT_ERRORS else INTERNAL_ERROR
        raise MCPError(code, str(payload["message"]), payload) from None
    log.event(kind, what=what, latency_ms=_ms(started))
    return result


CLIENT_ERRORS = ("INVALID_INPUT", "NOT_FOUND", "FORBIDDEN")


def make_server(
    settings: Settings, handle: BrainHandle, metrics: Metrics | None = None
) -> Server[Any]:
    """The MCP server: tools/list from the hand-written specs, tools/call through Brain;
    notes as resources (server/resources.py) and two prompts (server/prompts.py). Tool
    calls are counted in `metrics` when given (the HTTP server's /metrics)."""
    listed = ListToolsResult(tools=[t.tool() for t in tools.visible_tools(settings)])
    schemas = {t.name: t.input_schema for t in listed.tools}

    async def on_list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return listed

    async def on_call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        # Brain is synchronous and may take a while: keep the event loop free for other calls.
        return await anyio.to_thread.run_sync(
            call_tool, handle, settings, params.name, params.arguments, metrics
        )

    async def on_list_resources(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        return await anyio.to_thread.run_sync(
            answer,
            "resources_list",
            "",
            lambda: resources.list_resources(handle.get(), cursor),
        )

    async def on_list_resource_templates(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return resources.TEMPLATES

    async def on_read_resource(ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        return await anyio.to_thread.run_sync(
            answer,
            "resource",
            log.cut(uri, 80),
            lambda: resources.read_resource(handle.get(), uri),
        )

    async def on_list_prompts(ctx: Any, params: PaginatedRequestParams | None) -> ListPromptsResult:
        return prompts.list_prompts(settings)

    async def on_get_prompt(ctx: Any, params: GetPromptRequestParams) -> GetPromptResult:
        return await anyio.to_thread.run_sync(
            answer,
            "prompt",
            log.cut(params.name, 80),
            lambda: prompts.get_prompt(settings, handle.get, params.name, params.arguments),
        )

    return Server(
        "vault-brain",
        version=vault_brain.__version__,
        instructions=(
            "The user's notes (Markdown). memory_search first, memory_get to read one, "
            "memory_save for new knowledge worth keeping."
        ),
        get_tool_input_schema=schemas.get,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )


class JsonLogHandler(logging.Handler):
    """Routes library logs (mcp, uvicorn) into our JSON lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001
            message = str(record.msg)
        level = "warning" if record.levelno >= logging.WARNING else "info"
        log.event(record.name, level=level, message=log.cut(message, 200))


def route_library_logs() -> None:
    """Library warnings as JSON lines; their chatty info logs stay off."""
    for name in ("mcp", "uvicorn", "uvicorn.error", "httpx"):
        logger = logging.getLogger(name)
        logger.handlers = [JsonLogHandler()]
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _where(exc: BaseException) -> str:
    """file:line of the innermost frame: enough to find a bug, and never note text."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"
