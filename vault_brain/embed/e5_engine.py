"""The strong tier's passages through our own fused int8 encoder (native/e5native.c).

onnxruntime runs the int8 graph (e5_graph) as ~20 passes a layer: the per-row
quantisation, its u8s8 GEMM, the zero-point correction, GELU, the norms. e5native does the
same arithmetic with those steps fused around a GEMM of its own (AVX-512 VNNI where the
CPU has it), the FFN's activations never leaving the cache (docs/benchmarks.md, "The e5
tier's rate, round 11: 20.0 against 27.4 CPU-ms a chunk, 96 against 70 chunks/s on two
cores). It is the default where its AVX-512 VNNI path runs; elsewhere onnxruntime's graph
runs, and VAULT_BRAIN_E5_ENGINE=onnxruntime asks for the graph anywhere. The engine is
checked against the shipped reference vectors at load like any kernel (e5.MIN_AGREEMENT).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

ENGINE_ENV = "VAULT_BRAIN_E5_ENGINE"
# e5native.ISA: the path its import chose. Only the VNNI one is faster than onnxruntime
# (AVX2's and plain C's float steps are scalar: ~105 and ~990 CPU-ms a chunk against
# ~20, docs/benchmarks.md "The e5 tier's rate, round 11"); they are kept for the tests,
# which check the arithmetic on every path.
ISA_VNNI = 2


ONNXRUNTIME = "onnxruntime"  # the env value that keeps onnxruntime's graph


def wanted() -> bool:
    """Whether this process takes the native engine where it is fast (the default; unset,
    "native" or anything but "onnxruntime")."""
    return os.environ.get(ENGINE_ENV, "") != ONNXRUNTIME


def asked() -> bool:
    """Whether the native engine was asked for by name (a warning where it cannot run)."""
    return os.environ.get(ENGINE_ENV, "") == "native"


def module() -> Any:
    """The C module, or None where it is not built."""
    from vault_brain.native import load

    return load("e5native")


def fast_here() -> bool:
    """Whether the module is built and runs its AVX-512 VNNI path on this CPU."""
    mod = module()
    return mod is not None and mod.ISA >= ISA_VNNI


class NativeSession:
    """An onnxruntime session's `run` as embed/e5._run calls it: `embeddings` float32
    [rows, length, hidden] in, the pooled mean [rows, hidden] out. The C call releases the
    GIL, so the embedder's threads run batches side by side as they do with onnxruntime."""

    def __init__(self, engine: Any, hidden: int) -> None:
        self.engine = engine
        self.hidden = hidden

    def run(self, _outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        x = np.ascontiguousarray(feeds["embeddings"], dtype=np.float32)
        rows, length, hidden = x.shape
        if hidden != self.hidden:
            raise ValueError(f"embeddings of width {hidden}, {self.hidden} expected")
        out = np.empty((rows, hidden), dtype=np.float32)
        self.engine.run(x, rows, length, out)
        return [out]


def open_engine(weights: Any) -> NativeSession:
    """The engine over these weights (e5_query's int8 arrays, packed by the C module).
    RuntimeError when the module is not built."""
    from vault_brain.embed.e5_native import array_order
    from vault_brain.embed.e5_query import encoder_arrays

    mod = module()
    if mod is None:
        raise RuntimeError("vault_brain.native.e5native is not built")
    h = weights.header
    arrays = encoder_arrays(weights)
    ordered = [np.ascontiguousarray(arrays[name]) for name in array_order(h.layers)]
    engine = mod.Engine(h.hidden, h.layers, h.heads, h.ffn, h.max_positions, float(h.eps), ordered)
    return NativeSession(engine, h.hidden)
