"""A real HTTP server on loopback that speaks Ollama and OpenAI, for tests of remote providers.

Starlette served by uvicorn in a background thread, on a port the OS picks. Embeddings are
deterministic (seeded by a hash of the text, deliberately not unit length), chat replies are
configurable, and switches make it hold its replies, fail, or answer garbage. Every request is
recorded.

    with FakeLLMServer() as server:
        server.behaviour.mode = "error500"
        settings = EmbedSettings(provider="ollama", base_url=server.url, model="fake")
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.waiting import HANG_SECONDS

# What the `mode` switch can make the server do instead of answering properly.
MODES = (
    "ok",  # a correct answer
    "error500",  # HTTP 500 with a JSON error body
    "garbage",  # 200 with a body that is not JSON
    "missing_field",  # 200, valid JSON without "embeddings" / "data" / "message" / "choices"
    "wrong_count",  # one vector fewer than texts
    "wrong_dim",  # vectors of `dimension + 1` numbers
    "nan",  # NaN in the first vector (JSON's non-standard NaN literal, as Python writes it)
)
# The last three only change embedding replies; chat answers normally in them.


@dataclass
class Behaviour:
    """Switches a test flips; reset() restores the defaults between tests."""

    mode: str = "ok"
    dimension: int = 8
    # Requests wait for release() (or reset()) before they are answered: a reply that comes
    # only when the test says so, so a client's timeout or concurrency is seen without
    # guessing how long a busy machine takes.
    hold: bool = False
    chat_reply: str = "A short summary of the note."
    require_api_key: str = ""  # when set, requests without "Bearer <key>" get HTTP 401


@dataclass(frozen=True)
class Seen:
    """One request as the server saw it."""

    path: str
    model: str
    inputs: tuple[str, ...]  # embedding texts ("input"), empty for chat
    messages: tuple[dict[str, Any], ...]  # chat messages, empty for embeddings
    authorization: str
    body: dict[str, Any] = field(default_factory=dict)


def fake_vector(text: str, dimension: int) -> list[float]:
    """The server's embedding of `text`: the same text always gives the same vector."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")
    return (np.random.default_rng(seed).normal(size=dimension) * 3.0).round(6).tolist()


class FakeLLMServer:
    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests handled at once since reset()
        self._gate = threading.Event()  # set: held requests go on

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="fake-llm"
        )
        self._thread.start()
        deadline = time.monotonic() + HANG_SECONDS
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake LLM server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._gate.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def release(self) -> None:
        """Let every held request (and any later one) be answered."""
        self._gate.set()

    def reset(self) -> None:
        """Default switches and an empty record; requests a test left held are answered
        (to a client long gone) first, so none of them counts in the next test."""
        self._gate.set()
        deadline = time.monotonic() + HANG_SECONDS
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._lock:
            self.behaviour = Behaviour()
            self.requests.clear()
            self.max_in_flight = 0
            self._gate = threading.Event()

    # -- what was seen ------------------------------------------------------------------

    def seen(self, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def batch_sizes(self) -> list[int]:
        return [len(r.inputs) for r in self.seen() if r.inputs]

    # -- the app ------------------------------------------------------------------------

    def app(self) -> Starlette:
        routes = [
            Route("/api/embed", self._ollama_embed, methods=["POST"]),
            Route("/v1/embeddings", self._openai_embed, methods=["POST"]),
            Route("/api/chat", self._ollama_chat, methods=["POST"]),
            Route("/v1/chat/completions", self._openai_chat, methods=["POST"]),
        ]
        return Starlette(routes=routes)

    async def _receive(self, request: Request) -> tuple[Behaviour, dict[str, Any], Response | None]:
        """Record the request, apply delay and failure switches; a Response means answer it."""
        try:
            body = await request.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        auth = request.headers.get("authorization", "")
        with self._lock:
            behaviour, gate = self.behaviour, self._gate
            self.requests.append(
                Seen(
                    path=request.url.path,
                    model=str(body.get("model", "")),
                    inputs=_texts(body),
                    messages=tuple(body.get("messages", ()) or ()),
                    authorization=auth,
                    body=body,
                )
            )
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # Held until released; a test that never releases gets its reply after the
            # hang deadline, so a client without a timeout fails the test, not hangs it.
            held_until = time.monotonic() + HANG_SECONDS
            while behaviour.hold and not gate.is_set() and time.monotonic() < held_until:
                await asyncio.sleep(0.005)
        finally:
            with self._lock:
                self.in_flight -= 1
        if behaviour.require_api_key and auth != f"Bearer {behaviour.require_api_key}":
            return behaviour, body, JSONResponse({"error": "unauthorized"}, status_code=401)
        if behaviour.mode == "error500":
            return behaviour, body, JSONResponse({"error": "boom"}, status_code=500)
        if behaviour.mode == "garbage":
            return behaviour, body, PlainTextResponse("<html>not json{", status_code=200)
        if behaviour.mode == "missing_field":
            return behaviour, body, JSONResponse({"unexpected": True})
        return behaviour, body, None

    def _vectors(self, behaviour: Behaviour, texts: tuple[str, ...]) -> list[list[float]]:
        width = behaviour.dimension + (1 if behaviour.mode == "wrong_dim" else 0)
        vectors = [fake_vector(text, width) for text in texts]
        if behaviour.mode == "wrong_count":
            vectors = vectors[:-1]
        if behaviour.mode == "nan" and vectors:
            vectors[0][0] = float("nan")
        return vectors

    @staticmethod
    def _json(payload: dict[str, Any]) -> Response:
        # allow_nan: the "nan" mode must be able to put NaN on the wire.
        return Response(json.dumps(payload, allow_nan=True), media_type="application/json")

    async def _ollama_embed(self, request: Request) -> Response:
        behaviour, body, early = await self._receive(request)
        if early is not None:
            return early
        vectors = self._vectors(behaviour, _texts(body))
        return self._json({"model": body.get("model", ""), "embeddings": vectors})

    async def _openai_embed(self, request: Request) -> Response:
        behaviour, body, early = await self._receive(request)
        if early is not None:
            return early
        vectors = self._vectors(behaviour, _texts(body))
        # Out of order on purpose: clients must sort by "index".
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][
            ::-1
        ]
        return self._json({"object": "list", "data": data, "model": body.get("model", "")})

    async def _ollama_chat(self, request: Request) -> Response:
        behaviour, body, early = await self._receive(request)
        if early is not None:
            return early
        message = {"role": "assistant", "content": behaviour.chat_reply}
        return self._json({"model": body.get("model", ""), "message": message, "done": True})

    async def _openai_chat(self, request: Request) -> Response:
        behaviour, body, early = await self._receive(request)
        if early is not None:
            return early
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": behaviour.chat_reply},
            "finish_reason": "stop",
        }
        return self._json({"object": "chat.completion", "choices": [choice]})


def _texts(body: dict[str, Any]) -> tuple[str, ...]:
    raw = body.get("input", [])
    return (raw,) if isinstance(raw, str) else tuple(str(x) for x in raw or ())


_BOUND: list[socket.socket] = []


def closed_port_url() -> str:
    """A loopback URL where nothing listens: connections are refused at once. Its port
    stays bound (never listening) for the test session, so no other process on the
    machine can start listening there meanwhile."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    _BOUND.append(sock)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"
