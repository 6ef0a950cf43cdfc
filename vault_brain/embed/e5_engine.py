"""The strong tier's passages through our own fused int8 encoder (native/e5native.c).

onnxruntime runs the int8 graph (e5_graph) as ~20 passes a layer: the per-row
quantisation, its u8s8 GEMM, the zero-point correction, GELU, the norms. e5native does the
same arithmetic with those steps fused around a GEMM of its own, the FFN's activations
never leaving the cache (docs/benchmarks.md, "The e5 tier's rate, round 11": 20.0 against
27.4 CPU-ms a chunk on AVX-512 VNNI; "The e5 tier's AVX2 path, round 12": vpmaddwd on
int16 copies of the weights and the float steps 8 wide where there is no VNNI). It is the
default where its AVX-512 VNNI or AVX2 + FMA path runs; elsewhere (plain C: ~1 s a
chunk) onnxruntime's graph runs, and VAULT_BRAIN_E5_ENGINE=onnxruntime asks for the graph
anywhere. The engine is checked against the shipped reference vectors at load like any
kernel (e5.MIN_AGREEMENT).

VAULT_BRAIN_E5_ISA=avx2|portable is a bench and test knob, not a user setting: it lowers
the engine's path below the one its import chose (never raises it), so that the AVX2 path
can be measured and checked on a CPU with VNNI. "portable" makes the engine not fast here
(the graph runs unless the engine is asked for by name).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

ENGINE_ENV = "VAULT_BRAIN_E5_ENGINE"
ISA_ENV = "VAULT_BRAIN_E5_ISA"
# e5native.ISA: the path its import chose (0 plain C, 1 AVX2 + FMA, 2 AVX-512 VNNI). The
# SIMD ones are faster than onnxruntime's graph on their CPUs (a whole index: VNNI ~20
# CPU-ms a chunk against ~27; AVX2 ~41 against the graph's ~50 on the same EPYC with its
# AVX-512 hidden by bench/avx2_only.py, issue 23); plain C (~1 s a chunk) is kept for the
# tests, which check the arithmetic on every path, and runs nowhere by default.
ISA_PORTABLE, ISA_AVX2, ISA_VNNI = 0, 1, 2
ISA_NAMES = {"portable": ISA_PORTABLE, "avx2": ISA_AVX2, "vnni": ISA_VNNI}


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


def isa() -> int:
    """The path the engine runs here: the module's, lowered by VAULT_BRAIN_E5_ISA (an
    unknown value lowers nothing); -1 where the module is not built."""
    mod = module()
    if mod is None:
        return -1
    forced = ISA_NAMES.get(os.environ.get(ISA_ENV, "").strip().lower(), mod.ISA)
    return min(mod.ISA, forced)


def fast_here() -> bool:
    """Whether the module is built and runs a SIMD path (AVX2 + FMA or AVX-512 VNNI) here."""
    return isa() >= ISA_AVX2


class NativeSession:
    """An onnxruntime session's `run` as embed/e5._run calls it: `embeddings` float32
    [rows, length, hidden] in, the pooled mean [rows, hidden] out. The C call releases the
    GIL, so the embedder's threads run batches side by side as they do with onnxruntime."""

    def __init__(self, engine: Any, hidden: int, path: int) -> None:
        self.engine = engine
        self.hidden = hidden
        self.isa = path

    def run(self, _outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        x = np.ascontiguousarray(feeds["embeddings"], dtype=np.float32)
        rows, length, hidden = x.shape
        if hidden != self.hidden:
            raise ValueError(f"embeddings of width {hidden}, {self.hidden} expected")
        out = np.empty((rows, hidden), dtype=np.float32)
        self.engine.run(x, rows, length, out, self.isa)
        return [out]


def open_engine(weights: Any) -> NativeSession:
    """The engine over these weights (e5_query's int8 arrays, packed by the C module), on
    the path isa() names. RuntimeError when the module is not built."""
    from vault_brain.embed.e5_native import array_order
    from vault_brain.embed.e5_query import encoder_arrays

    mod = module()
    if mod is None:
        raise RuntimeError("vault_brain.native.e5native is not built")
    h = weights.header
    arrays = encoder_arrays(weights)
    ordered = [np.ascontiguousarray(arrays[name]) for name in array_order(h.layers)]
    engine = mod.Engine(h.hidden, h.layers, h.heads, h.ffn, h.max_positions, float(h.eps), ordered)
    return NativeSession(engine, h.hidden, isa())
