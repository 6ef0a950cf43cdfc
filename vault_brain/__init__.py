"""vault-brain: a second brain for LLMs that lives in a folder of Markdown notes."""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS starts a spinning thread per core at import: ~90 CPU-ms of a one-shot
# hybrid search, stolen from the search itself on a busy machine (wall 0.63 against 0.81 s
# on cpp-docs at load 2-3), and nothing here is big enough for BLAS threads to pay
# (a query against a vault's vectors is one matrix-vector product). A user's own choice
# stands. Set before anything imports numpy: every entry (CLI, server, tests) imports this.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# onnxruntime (1.32 here) opens a telemetry store at import, in the user's cache
# (Microsoft/DeveloperTools/.onnxruntime: an SQLite file written with fsyncs at import and at
# exit): CPU and wall time of every first hybrid search, and a file nobody asked for. A
# user's own choice stands.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
