"""Embedding providers: one small protocol so the index never cares where vectors come from.

Providers are imported lazily by `make_embedder`, so importing this package (as every
MCP server start does) never pulls in model2vec or opens a connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from vault_brain.config import EmbedSettings


class Embedder(Protocol):
    name: str  # identity recorded in the index, e.g. "local:minilm-static-256"

    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...

    # Optional: `embed_queries(texts)` when queries are embedded differently from passages
    # (e5's "query: " prefix); callers use the function `embed_queries` below.


def embed_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Vectors for search queries: the embedder's query form if it has one, else `embed`."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if callable(method) else embedder.embed(texts)


def make_embedder(settings: EmbedSettings) -> Embedder | None:
    """The configured provider, or None when embeddings are off (search is full text only)."""
    provider = settings.provider
    if provider == "none":
        return None
    if provider == "local":
        from vault_brain.embed.local import LocalEmbedder

        return LocalEmbedder(settings)
    if provider in ("ollama", "openai"):
        from vault_brain.embed.remote import make_remote

        return make_remote(settings)
    from vault_brain.errors import InvalidInput

    raise InvalidInput(f"unknown embedding provider {provider!r}")


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float32; all-zero rows (empty text) stay zero, never NaN."""
    # float64 while scaling, so huge but finite components do not overflow to inf.
    out = np.array(vectors, dtype=np.float64)  # a copy: the caller's array is never changed
    if out.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {out.shape}")
    peak = np.abs(out).max(axis=1, keepdims=True) if out.size else np.ones((len(out), 1))
    np.divide(out, peak, out=out, where=peak > 0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out.astype(np.float32)
