"""The instant tier's vectors of every chunk of a vault: tokenizers against the cached pieces
(embed/piece_tokens.py), CPU seconds and identity (issue 23, round 7).

    VAULT_BRAIN_SHARED=/work/shared .venv/bin/python -m bench.static_tokens --vault cpp-docs
    .venv/bin/python -m bench.static_tokens --vault obsidian-help-i18n --rounds 3

The chunks are what a cold index embeds (index.prepare: every note's chunks, embed_text),
in the parse workers' batches (the chunks of 32 files per call), dealt round-robin to
`--workers` models as the pool deals its messages, each model with its own cache, cold at
the start of each round. Per round, alternated, each with fresh models:

- tokenizers: `encode_batch_fast` of the texts (the path before round 7: the model with its
  piece cache turned off);
- pieces: the same ids from the cached pieces (StaticModelFile.token_ids), in Python;
- compiled: the same through vault_brain/native/staticnative.c (round 10; left out where it
  is not built);
- vectors, each path: the whole `encode` (ids, the unknown token's drop, gathers and means;
  the compiled path's means read the float16 rows).

Every chunk's ids and every vector are compared with the tokenizers path's: the bench exits
1 on any difference.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    code_commit,
    machine,
    markdown_table,
    progress,
    shared_dir,
    unpack,
    write_json,
)

VAULTS = {
    "cpp-docs": ("cpp-docs.tar.gz", "cpp-docs/docs"),
    "obsidian-help-i18n": ("obsidian-help-i18n.tar.gz", "obsidian-help-i18n"),
}
FILES_PER_BATCH = 32  # index/workers.py CHUNK


def chunk_batches(vault: Path) -> list[list[str]]:
    """The texts each parse-worker message embeds: the chunks of 32 files."""
    from vault_brain.config import load_settings
    from vault_brain.index.prepare import embed_text, prepare
    from vault_brain.vault.scan import scan_vault

    settings = load_settings(vault=str(vault), env={})
    per_file = []
    for stat in scan_vault(vault).files:
        done = prepare(vault, stat, None, settings, False)
        per_file.append([embed_text(c) for c in done.rows[1]] if done.rows is not None else [])
    return [
        [t for texts in per_file[at : at + FILES_PER_BATCH] for t in texts]
        for at in range(0, len(per_file), FILES_PER_BATCH)
    ]


PATHS = ("tokenizers", "pieces", "compiled")


def models(count: int, path: str) -> list:
    from vault_brain.embed.local import BUNDLED_MODEL
    from vault_brain.embed.static import StaticModelFile

    out = []
    for _ in range(count):
        model = StaticModelFile.load(BUNDLED_MODEL)
        if path != "compiled":
            model.native = None  # numpy's gathers and the Python pieces
        if path == "tokenizers":
            model._pieces = False  # noqa: SLF001 - the tokenizers path, as before round 7
        out.append(model)
    return out


def timed(batches: list[list[str]], workers: int, path: str, what: str) -> tuple[float, list]:
    """CPU seconds of `what` ("ids" or "vectors") over all batches, and the results."""
    pool = models(workers, path)
    start = time.process_time()
    out = []
    for n, batch in enumerate(batches):
        model = pool[n % workers]
        out.append(model.token_ids(batch) if what == "ids" else model.encode(batch))
    return time.process_time() - start, out


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="cpp-docs", choices=sorted(VAULTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="models the batches are dealt to")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="vb-static-tokens-"))
    try:
        archive, prefix = VAULTS[args.vault]
        vault = unpack(shared_dir() / "corpora" / archive, prefix, tmp)
        progress("chunking the vault")
        batches = [b for b in chunk_batches(vault) if b]
        chunks = sum(map(len, batches))
        from vault_brain.embed.static_native import STATIC

        paths = PATHS if STATIC is not None else PATHS[:2]
        cpu: dict[str, list[float]] = {f"{w}: {p}": [] for w in ("ids", "vectors") for p in paths}
        differ = {"ids": 0, "vectors": 0}
        ids: list = []
        for n in range(args.rounds):
            progress(f"round {n + 1}/{args.rounds}")
            for what in ("ids", "vectors"):
                ref = None
                for path in paths:  # alternated, tokenizers (the reference) first
                    s, got = timed(batches, args.workers, path, what)
                    cpu[f"{what}: {path}"].append(s)
                    if ref is None:
                        ref = got
                    elif what == "ids":
                        for (a, la), (b, lb) in zip(got, ref, strict=True):
                            same = np.array_equal(a, b) and np.array_equal(la, lb)
                            differ["ids"] += int(not same)
                    else:
                        for a, b in zip(got, ref, strict=True):
                            bad = int((a != b).any(axis=1).sum()) if a.shape == b.shape else 1
                            differ["vectors"] += bad
                    if what == "ids":
                        ids = got
        tokens = int(sum(len(a) for a, _ in ids))
        med = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
        record = {
            "machine": machine(),
            "commit": code_commit(),
            "vault": args.vault,
            "chunks": chunks,
            "batches": len(batches),
            "tokens": tokens,
            "workers": args.workers,
            "rounds": args.rounds,
            "median_cpu_s": med,
            "cpu_s": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
            "differing": differ,
        }
        print(write_json(record, args.json_out))
        print()
        rows = [
            (k, med[k], f"{min(cpu[k]):.2f}–{max(cpu[k]):.2f}", round(1e9 * med[k] / tokens))
            for k in cpu
        ]
        print(markdown_table(["step", "median CPU s", "range", "ns / token"], rows))
        print(f"\n{chunks} chunks, {tokens} tokens; differing: {differ}")
        return 1 if any(differ.values()) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
