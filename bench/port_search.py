"""Search latency of one code tree (the one on PYTHONPATH) on a cpp-docs index built once,
as bench/speed.py measures it (its 200 queries from titles and headings, 10 warm-up, a Brain
as a server holds it), plus each query's CPU time (what a loaded machine skews least): for
comparing two trees in alternated fresh processes without a cold index per run.

    PYTHONPATH=<tree> python bench/port_search.py build   <cpp-docs vault> <index dir>
    PYTHONPATH=<tree> python bench/port_search.py measure <cpp-docs vault> <index dir>
"""

import json
import os
import sys
import time
from pathlib import Path

from bench.common import bench_model
from bench.speed import _latency_ms, draw_queries
from vault_brain.config import load_settings
from vault_brain.log import set_quiet
from vault_brain.service import Brain

set_quiet(True)
what, vault, index = sys.argv[1:4]
settings = load_settings(
    vault=vault,
    env={},
    overrides={
        "embed": {"provider": "local", "model": bench_model() or "", "strong": "none"}
        if bench_model()
        else {"provider": "local", "strong": "none"},
        "index": {"path": str(Path(index) / "index.db")},
    },
)
brain = Brain(settings)
t = time.perf_counter()
report = brain.sync()
while brain.embed_pending() > 0:
    pass
out = {
    "code": os.environ["PYTHONPATH"],
    "sync_changed": report.changed,
    "sync_s": round(time.perf_counter() - t, 1),
    "load_before": os.getloadavg()[0],
}
if what == "measure":
    from bench.common import percentile

    queries = draw_queries(Path(vault))
    for mode in ("fts", "hybrid"):
        out[mode] = {k: round(v, 2) for k, v in _latency_ms(brain, queries, mode).items()}
        cpu = []  # CPU time of this process per query: what the load on the machine skews least
        for query in queries:
            c = time.process_time()
            brain.search(query, limit=10, mode=mode)
            cpu.append((time.process_time() - c) * 1000)
        out[mode + "_cpu"] = {
            "p50": round(percentile(cpu, 50), 2),
            "p95": round(percentile(cpu, 95), 2),
        }
    out["load_after"] = os.getloadavg()[0]
brain.close()
print(json.dumps(out))
