"""multilingual-e5-small's int8 encoder in numpy: the CLI's query vectors.

A one-shot CLI search that embeds its query through onnxruntime first pays the runtime's
import, a session on the kept graph and that session's first run (~110 ms on its critical
path, docs/benchmarks.md "The first hybrid search, round 8") for a forward pass of ~10
tokens. This computes the int8 graph's own arithmetic (e5_graph._Linear._int8) with numpy,
which the search has imported already:

- each token row quantised to uint8 over its own [min, max], as the graph does;
- the same int8 weight codes per output channel; their products with the row's codes
  summed in float32, where every partial sum is an integer below 2^24 (|q - 128| ≤ 128,
  |w| ≤ 127, 384 terms; the FFN's 1,536-term sums are four such, added in float64), so
  the sums are the integer kernel's exactly, on any CPU and BLAS;
- the same float steps after (scales, zero-point correction, GELU, LayerNorm, attention).

Not bit-equal to onnxruntime: its erf, LayerNorm and softmax round otherwise in the last
bit, which now and then moves an activation across a quantisation step, and e5's late
layers amplify that: cosine ~0.9997 to the graph's vector of the same query, as close to
the exact model as the graph (tests/embed/test_e5_query.py). So every CLI search takes this
encoder, in whatever process answers it (the CLI's own, its resident, a watcher), and prints
the same bytes from each; MCP searches keep the graph, where a query costs ~5 ms against
~15 here (all 85 MB of float32 codes stream through memory for every query).

The codes are kept as float32 in the user's cache (`flat_weights`, written once), so a
later process maps them instead of requantising the 4-bit file (~0.5 s).
"""

from __future__ import annotations

import math

import numpy as np

from vault_brain.embed.e5_weights import E5Weights, dequantise

_SPLIT = 384  # terms per float32 partial sum: 384 · 128 · 127 < 2^24


def _shapes(weights: E5Weights) -> dict[str, tuple[int, int]]:
    """(n_in, n_out) of each matrix of a layer ("qkv": q, k and v stacked, as the graph
    fuses them)."""
    h = weights.header
    return {
        "qkv": (h.hidden, 3 * h.hidden),
        "ao": (h.hidden, h.hidden),
        "fi": (h.hidden, h.ffn),
        "fo": (h.ffn, h.hidden),
    }


def _layout(weights: E5Weights) -> list[tuple[str, int, tuple[int, ...]]]:
    """(key, float32 offset, shape) of every array the flat file holds, in order."""
    out, at = [], 0
    for layer in range(weights.header.layers):
        for m, (n_in, n_out) in _shapes(weights).items():
            for part, shape in (("codes", (n_in, n_out)), ("scale", (n_out,)), ("sums", (n_out,))):
                out.append((f"l{layer}.{m}.{part}", at, shape))
                at += math.prod(shape)
    return out


def flat_size(weights: E5Weights) -> int:
    """Bytes of the flat file for these weights: per layer, each matrix's codes, scales and
    column sums."""
    per_layer = sum(n_in * n_out + 2 * n_out for n_in, n_out in _shapes(weights).values())
    return 4 * weights.header.layers * per_layer


def flat_weights(weights: E5Weights) -> np.ndarray:
    """The int8 graph's weights as one float32 array, the kept file's bytes: per layer and
    matrix, its codes [n_in, n_out], each output channel's scale, and the column sums the
    zero-point correction takes (code sums times scale), exactly as e5_graph computes them.
    Filled in place, one matrix at a time (85 MB, no second copy)."""
    from vault_brain.embed.e5_graph import _int8_per_channel

    h = weights.header
    out = np.empty(flat_size(weights) // 4, dtype="<f4")
    places = {key: (at, math.prod(shape)) for key, at, shape in _layout(weights)}
    for layer in range(h.layers):
        p = f"l{layer}."
        blocks = {
            "qkv": np.concatenate(
                [weights.q4(f"{p}{m}.w", h.hidden, h.hidden) for m in ("q", "k", "v")], axis=0
            ),
            "ao": weights.q4(f"{p}ao.w", h.hidden, h.hidden),
            "fi": weights.q4(f"{p}fi.w", h.ffn, h.hidden),
            "fo": weights.q4(f"{p}fo.w", h.hidden, h.ffn),
        }
        for m, matrix in blocks.items():
            codes, scale = _int8_per_channel(dequantise(matrix))
            sums = (codes.astype(np.float32).sum(axis=0) * scale).astype(np.float32)
            for part, values in (("codes", codes), ("scale", scale), ("sums", sums)):
                at, size = places[f"l{layer}.{m}.{part}"]
                out[at : at + size] = values.ravel()
    return out


class QueryEncoder:
    """The encoder over `flat` (flat_weights' array, or a read-only mapping of the
    kept file) and the 4-bit file's vectors and norms. `pooled(ids)` gives what the graph's
    output `pooled` gives: the unnormalised mean of the last hidden states."""

    def __init__(self, weights: E5Weights, flat: np.ndarray) -> None:
        if flat.dtype != np.dtype("<f4") or 4 * flat.size != flat_size(weights):
            raise ValueError("the flat weights do not fit this model")
        h = weights.header
        self.header = h
        self._words = weights.q4("emb.word", h.vocab_rows, h.hidden)
        self._positions = (
            weights.f32("emb.pos", h.max_positions, h.hidden)
            + weights.f32("emb.type", h.type_vocab, h.hidden)[0]
        )
        self._eps = np.float32(h.eps)
        self._emb_norm = (weights.f32("emb.ln.w", h.hidden), weights.f32("emb.ln.b", h.hidden))
        self._arrays = {
            key: flat[at : at + math.prod(s)].reshape(s) for key, at, s in _layout(weights)
        }
        self._vectors: dict[str, np.ndarray] = {}
        for layer in range(h.layers):
            p = f"l{layer}."
            self._vectors[f"{p}qkv.b"] = np.concatenate(
                [weights.f32(f"{p}{m}.b", h.hidden) for m in ("q", "k", "v")]
            )
            for name, size in (("ao.b", h.hidden), ("fi.b", h.ffn), ("fo.b", h.hidden)):
                self._vectors[p + name] = weights.f32(p + name, size)
            for norm in ("aln", "oln"):
                for part in ("w", "b"):
                    self._vectors[f"{p}{norm}.{part}"] = weights.f32(f"{p}{norm}.{part}", h.hidden)

    def pooled(self, ids: list[list[int]]) -> np.ndarray:
        """[len(ids), hidden] float32; rows of one length run as one batch (no padding)."""
        out = np.zeros((len(ids), self.header.hidden), dtype=np.float32)
        by_length: dict[int, list[int]] = {}
        for row, x in enumerate(ids):
            by_length.setdefault(len(x), []).append(row)
        for rows in by_length.values():
            out[rows] = self._batch(np.array([ids[r] for r in rows], dtype=np.int64))
        return out

    def _batch(self, tokens: np.ndarray) -> np.ndarray:
        h = self.header
        b, length = tokens.shape
        heads, size = h.heads, h.hidden // h.heads
        v = self._vectors
        x = dequantise(self._words[tokens]) + self._positions[:length]
        x = self._norm(x.reshape(b * length, h.hidden), *self._emb_norm)
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in range(h.layers):
            p = f"l{layer}."
            qkv = self._linear(x, p + "qkv")
            qkv += v[p + "qkv.b"]
            q, k, w = (
                part.reshape(b, length, heads, size).transpose(0, 2, 1, 3)
                for part in np.split(qkv, 3, axis=1)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale  # [b, heads, length, length]
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            att = (scores @ w).transpose(0, 2, 1, 3).reshape(b * length, h.hidden)
            out = self._linear(att, p + "ao")
            out += v[p + "ao.b"]
            x = self._norm(out + x, v[p + "aln.w"], v[p + "aln.b"])
            mid = self._linear(x, p + "fi")
            mid += v[p + "fi.b"]
            out = self._linear(_gelu(mid), p + "fo")
            out += v[p + "fo.b"]
            x = self._norm(out + x, v[p + "oln.w"], v[p + "oln.b"])
        return x.reshape(b, length, h.hidden).mean(axis=1)

    def _norm(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        centred = x - x.mean(axis=1, keepdims=True)
        variance = (centred * centred).mean(axis=1, keepdims=True)
        return centred / np.sqrt(variance + self._eps) * w + b

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """x [t, n_in] times the matrix, as e5_graph's int8 path computes it."""
        codes = self._arrays[name + ".codes"]
        hi = np.maximum(x.max(axis=1, keepdims=True), np.float32(0.0))
        lo = np.minimum(x.min(axis=1, keepdims=True), np.float32(0.0))
        step = np.maximum(hi - lo, np.float32(1e-12)) * np.float32(1 / 255)
        zero = np.clip(np.rint(-lo / step), np.float32(0.0), np.float32(255.0))
        q = np.rint(x / step)
        q += zero
        np.clip(q, np.float32(0.0), np.float32(255.0), out=q)
        q -= np.float32(128.0)
        y = exact_products(q, codes)
        y *= step * self._arrays[name + ".scale"]
        y -= ((zero - np.float32(128.0)) * step) * self._arrays[name + ".sums"]
        return y


def exact_products(q: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """q [t, n_in] @ codes [n_in, n_out], both integer-valued float32 (|q| ≤ 128, |codes| ≤
    127), as the integer kernel sums them, converted to float32 once: BLAS sums runs of
    _SPLIT terms (exact below 2^24), and the runs are added in float64 (exact too)."""
    n_in = codes.shape[0]
    sums = q[:, :_SPLIT] @ codes[:_SPLIT]
    if n_in <= _SPLIT:
        return sums
    total = sums.astype(np.float64)
    for start in range(_SPLIT, n_in, _SPLIT):
        total += q[:, start : start + _SPLIT] @ codes[start : start + _SPLIT]
    return total.astype(np.float32)


# Abramowitz & Stegun 7.1.26: |error| ≤ 1.5e-7 (float32's own rounding near 1 is 6e-8).
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def _gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / √2)), onnxruntime's Gelu; erf evaluated in float64."""
    z = np.abs(x, dtype=np.float64) * (1 / np.sqrt(2.0))
    t = 1.0 / (1.0 + _ERF_P * z)
    poly = _ERF_A[0]
    for a in _ERF_A[1:]:
        poly = poly * t + a
    erf = 1.0 - poly * t * np.exp(-z * z)
    erf = np.copysign(erf, x).astype(np.float32)
    erf += np.float32(1.0)
    erf *= x
    erf *= np.float32(0.5)
    return erf
