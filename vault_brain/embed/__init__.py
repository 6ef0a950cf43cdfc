"""Embedding providers: one small protocol so the index never cares where vectors come from.

Providers are imported lazily by `make_embedder`, so importing this package (as every
MCP server start does) never pulls in model2vec or opens a connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vault_brain.embed.base import Embedder, embed_queries, l2_normalise

if TYPE_CHECKING:
    from vault_brain.config import EmbedSettings
    from vault_brain.embed.e5 import Cache


def make_strong_embedder(settings: EmbedSettings, cache: Cache | None = None) -> Embedder | None:
    """The strong tier beside the local model (embed.strong), or None: it runs only with
    the local provider (a remote model the user chose is the vector arm as it is).
    `cache` (embed/cache.py's ModelCache, in the user's cache folder) keeps what the model
    builds at load for the next process."""
    if settings.provider != "local" or settings.strong == "none":
        return None
    from vault_brain.embed.e5 import E5Embedder

    return E5Embedder(max_tokens=settings.strong_max_tokens, cache=cache)


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


__all__ = ["Embedder", "embed_queries", "l2_normalise", "make_embedder", "make_strong_embedder"]
