"""The embedding protocol and the helpers every provider shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np


class Embedder(Protocol):
    name: str  # identity recorded in the index, e.g. "local:minilm-static-256"

    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of passages (chunks): float32, unit length, zero rows for empty text."""
        ...


def embed_queries(embedder: Embedder, texts: list[str], *, light: bool = False) -> np.ndarray:
    """Vectors of search queries. Models trained with a query/passage asymmetry (e5's
    "query: " prefix) give their `embed_queries`; symmetric ones embed queries as text.
    `light`: by the model's encoder that starts fastest, where it has one (e5's
    `embed_light_queries`, what the CLI's searches use)."""
    method = getattr(embedder, "embed_light_queries", None) if light else None
    method = method or getattr(embedder, "embed_queries", None)
    return method(texts) if callable(method) else embedder.embed(texts)


def query_vector(embedder: Embedder, text: str, *, light: bool = False) -> Any:
    """One search query's vector, as embed_queries gives it, or a row from the model's
    `light_query_rows` where it has them (e5's C encoder gives an array('f') without
    importing numpy: a one-shot search's forked child, search/semantic.py)."""
    rows = getattr(embedder, "light_query_rows", None) if light else None
    if callable(rows):
        return rows([text])[0]
    return embed_queries(embedder, [text], light=light)[0]


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float32; all-zero rows (empty text) stay zero, never NaN."""
    import numpy as np

    # float64 while scaling, so huge but finite components do not overflow to inf.
    out = np.array(vectors, dtype=np.float64)  # a copy: the caller's array is never changed
    if out.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {out.shape}")
    peak = np.abs(out).max(axis=1, keepdims=True) if out.size else np.ones((len(out), 1))
    np.divide(out, peak, out=out, where=peak > 0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out.astype(np.float32)
