"""Embeddings from a server: Ollama (`/api/embed`) or any OpenAI-compatible `/v1/embeddings`.

Every failure (refused, slow, HTTP error, a reply of the wrong shape) becomes Unavailable,
so the caller can fall back to full text and queue the work; retries with back-off belong
to that queue, not here, so a dead endpoint costs one fast failure. Error messages carry
the status and the reason, never the texts sent.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from vault_brain.config import EmbedSettings
from vault_brain.embed.base import l2_normalise
from vault_brain.endpoint import JsonEndpoint, api_key_from_env, current_cap, endpoint_url
from vault_brain.errors import ConfigError, Unavailable

PROBE_TEXT = "dimension probe"


class RemoteEmbedder:
    """Shared batching, concurrency and validation; subclasses know one wire protocol."""

    provider = ""
    path = ""
    remote = True  # a query embedding gets a short deadline (search/semantic.py)

    def __init__(self, settings: EmbedSettings, api_key: str | None = None) -> None:
        self.name = f"{self.provider}:{settings.model}"
        self.model = settings.model
        self.batch_size = max(1, settings.batch_size)
        self.concurrency = max(1, settings.concurrency)
        self.endpoint = JsonEndpoint(
            endpoint_url(settings.base_url, self.path, openai=self.provider == "openai"),
            what=f"embedding endpoint {self.name}",
            provider=self.provider,
            timeout=settings.timeout_seconds,
            concurrency=self.concurrency,
            api_key=api_key,
        )
        self.url = self.endpoint.url
        self._dim = settings.dimension if settings.dimension > 0 else 0
        self._dim_lock = threading.Lock()

    # -- protocol specifics -------------------------------------------------------------

    def _vectors(self, payload: Any, count: int) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the Embedder protocol ----------------------------------------------------------

    def dimension(self) -> int:
        if self._dim:
            return self._dim
        self.embed([PROBE_TEXT])  # the first answer fixes the dimension
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        # Empty texts are not sent (OpenAI refuses them); they embed as zero vectors.
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        if not wanted:
            return np.zeros((len(texts), self.dimension()), dtype=np.float32)
        batches = [
            [texts[i] for i in wanted[start : start + self.batch_size]]
            for start in range(0, len(wanted), self.batch_size)
        ]
        cap = current_cap()  # the caller's wait holds in the pool's threads too
        if len(batches) == 1 or self.concurrency == 1:
            results = [self._embed_batch(batch, cap) for batch in batches]
        else:
            workers = min(self.concurrency, len(batches))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
                results = list(pool.map(lambda b: self._embed_batch(b, cap), batches))
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        out[wanted] = np.concatenate(results)
        return out

    def close(self) -> None:
        self.endpoint.close()

    # -- one request --------------------------------------------------------------------

    def _embed_batch(self, batch: list[str], cap: float | None = None) -> np.ndarray:
        payload = self.endpoint.post({"model": self.model, "input": batch}, cap=cap)
        return self._check(self._vectors(payload, len(batch)), len(batch))

    def _check(self, rows: Sequence[Any], count: int) -> np.ndarray:
        if len(rows) != count:
            raise self._unavailable(f"reply has {len(rows)} vectors for {count} texts")
        if not all(isinstance(row, list) and row for row in rows):
            raise self._unavailable("reply has a vector that is not a list of numbers")
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) for row in rows for x in row
        ):
            raise self._unavailable("reply has a vector that is not a list of numbers")
        widths = {len(row) for row in rows}
        if len(widths) != 1:
            raise self._unavailable(f"reply mixes vector sizes {sorted(widths)}")
        width = widths.pop()
        with self._dim_lock:
            if not self._dim:
                self._dim = width
        if width != self._dim:
            raise self._unavailable(f"reply has dimension {width}, expected {self._dim}")
        try:
            vectors = np.asarray(rows, dtype=np.float64)
        except (OverflowError, ValueError) as exc:
            raise self._unavailable("reply has numbers out of range") from exc
        if not np.isfinite(vectors).all():
            raise self._unavailable("reply has non-finite numbers")
        return l2_normalise(vectors)

    def _unavailable(self, reason: str) -> Unavailable:
        return self.endpoint.unavailable(reason)


class OllamaEmbedder(RemoteEmbedder):
    """POST /api/embed {"model", "input": [...]} → {"embeddings": [[...], ...]}."""

    provider = "ollama"
    path = "/api/embed"

    def _vectors(self, payload: Any, count: int) -> list[Any]:
        if not isinstance(payload, dict) or not isinstance(payload.get("embeddings"), list):
            raise self._unavailable("reply has no 'embeddings' list")
        return payload["embeddings"]


class OpenAIEmbedder(RemoteEmbedder):
    """POST /v1/embeddings {"model", "input": [...]} → {"data": [{"index", "embedding"}]}."""

    provider = "openai"
    path = "/v1/embeddings"

    def _vectors(self, payload: Any, count: int) -> list[Any]:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise self._unavailable("reply has no 'data' list")
        items = []
        for item in data:
            if not isinstance(item, dict) or "embedding" not in item:
                raise self._unavailable("reply has an item without 'embedding'")
            index = item.get("index", len(items))
            if not isinstance(index, int) or isinstance(index, bool):
                raise self._unavailable("reply has an item with a bad 'index'")
            items.append((index, item["embedding"]))
        if sorted(index for index, _ in items) != list(range(len(items))):
            raise self._unavailable("reply indexes are not 0..n-1")
        items.sort(key=lambda pair: pair[0])
        return [embedding for _, embedding in items]


def make_remote(settings: EmbedSettings) -> RemoteEmbedder:
    """The remote provider for settings; an API key is read from the environment once, here."""
    api_key = api_key_from_env("embed", settings.api_key_env)
    if settings.provider == "ollama":
        return OllamaEmbedder(settings, api_key)
    if settings.provider == "openai":
        return OpenAIEmbedder(settings, api_key)
    raise ConfigError([f"embed.provider: {settings.provider!r} is not a remote provider"])
