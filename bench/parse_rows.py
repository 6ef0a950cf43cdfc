"""The CPU of each stage of turning a vault's notes into index rows, in one process (issue 23):
what a parse worker spends per note on a cold `index`, stage by stage.

    .venv/bin/python -m bench.parse_rows --vault cpp-docs [--notes N] [--rounds 3]
    (cd <other checkout> && .venv/bin/python -m bench.parse_rows ...)  # a copy of this file

Each stage runs over every note before the next starts (stage-major), timed with
time.process_time, so a stage's figure holds its own work only:

- read: the file's bytes (NoteReader.read, one reader for the vault as a parse worker
  has: the symlink and path checks, the read);
- frontmatter: UTF-8 decode and the frontmatter block's YAML (note._split_frontmatter);
- parse body: the rest of parse_note (blocks, code masking, tags, links, lead, hashes):
  parse_note's time less the frontmatter stage's;
- lang: the `lang:` key (frontmatter_language) and language detection (note_language);
- token counts: cl100k tokens of every section, as chunk_note encodes them (ids, or their
  byte lengths with the C encoder: load_cpu_s names the library);
- chunking: the cut into windows (chunk_note's time less the token counts);
- analysis: the full-text terms build_rows makes (title, tags, each distinct heading path,
  each chunk's body and the note's from the chunks' pieces: index/prepare.py);
- rows: the rest of build_rows (records and hashes): its time less lang, chunking and
  analysis;
- static vectors: the instant tier's vectors of every chunk (the bundled model, batches of
  32 files, as a parse worker makes them);
- prepare: the whole of index.prepare.prepare (read to rows, no vectors), for a check that
  the stages add up.

The tokenizer and the model are loaded before the timing (their load is reported apart).
To measure another checkout (the code before a change), copy this file into its bench/
and run it there: it measures the vault_brain it imports.
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

from bench.cli import copy_vault  # noqa: E402
from bench.common import code_commit, machine, markdown_table, progress, write_json  # noqa: E402

STAGES = (
    "read",
    "frontmatter",
    "parse body",
    "lang",
    "token counts",
    "chunking",
    "analysis",
    "rows",
    "static vectors",
)


def _cpu(fn, items):  # noqa: ANN001, ANN202
    start = time.process_time()
    out = [fn(x) for x in items]
    return time.process_time() - start, out


def measure(vault: Path, notes: int, vectors: bool) -> dict:
    import vault_brain
    from vault_brain.config import EmbedSettings, load_settings
    from vault_brain.index import chunking
    from vault_brain.index.prepare import (
        _strip_title,
        analysed_bodies,
        build_rows,
        embed_text,
        prepare,
    )
    from vault_brain.text.analysis import analyze, frontmatter_language, note_language
    from vault_brain.vault import note as note_mod
    from vault_brain.vault.reading import NoteReader
    from vault_brain.vault.scan import scan_vault

    settings = load_settings(vault=str(vault), env={})
    files = scan_vault(vault).files
    if notes:
        files = files[:notes]
    start = time.process_time()
    encoder = chunking._encoder()
    load = {
        "tokenizer": round(time.process_time() - start, 3),
        "encoder": encoder.name,
        "library": encoder.library,
    }
    c = settings.chunk
    follow = settings.vault.follow_outside
    cpu: dict[str, float] = {}

    reader = NoteReader(vault, follow)
    cpu["read"], raws = _cpu(lambda s: reader.read(s.path), files)

    def frontmatter(raw: bytes) -> tuple:
        text = raw.decode("utf-8").removeprefix("\ufeff")
        return note_mod._split_frontmatter(text, [])

    cpu["frontmatter"], _ = _cpu(frontmatter, raws)
    pairs = list(zip(files, raws, strict=True))
    parse_s, parsed = _cpu(lambda p: note_mod.parse_note(p[0].path, p[1]), pairs)
    cpu["parse body"] = parse_s - cpu["frontmatter"]

    def lang(p: tuple) -> str:
        (stat, raw), note = p
        fm = frontmatter_language(raw[:8192].decode("utf-8", "ignore"))
        return note_language(f"{note.title}\n\n{note.body}", fm, settings.text.languages)

    cpu["lang"], langs = _cpu(lang, list(zip(pairs, parsed, strict=True)))

    def sections(note) -> list[str]:  # noqa: ANN001 - the texts chunk_note encodes
        title = chunking._clean(note.title)
        body = chunking._clean(note.body)
        if not body.strip():
            return []
        secs = chunking._sections(title, body, note.headings)
        ends = [start for start, _ in secs[1:]] + [len(body)]
        return [body[s:e] for (s, _), e in zip(secs, ends, strict=True)]

    texts = [t for note in parsed for t in sections(note)]
    cpu["token counts"], _ = _cpu(encoder.encode, texts)
    chunk_s, chunked = _cpu(
        lambda n: chunking.chunk_note(
            n.title, n.body, c.max_tokens, c.overlap, c.min_tokens, n.headings
        ),
        parsed,
    )
    cpu["chunking"] = chunk_s - cpu["token counts"]

    def analysis(p: tuple) -> None:  # what build_rows analyses, in its order
        note, chunks, lg = p
        analyze(" ".join([note.title, *note.aliases, note.summary]), lg)
        analyze(" ".join(note.tags), lg)
        paths = {_strip_title(ch.heading_path, note.title) for ch in chunks}
        for headings in paths:
            analyze(headings, lg)
        analysed_bodies(note.body, chunks, lg)  # each chunk's body, and the note's from them

    # The stemmers' word caches fill in this stage: build_rows below finds them warm, so
    # its remainder ("rows") is records and hashes, as in a real pass after its first notes.
    triples = list(zip(parsed, chunked, langs, strict=True))
    cpu["analysis"], _ = _cpu(analysis, triples)
    quads = list(zip(parsed, files, strict=True))
    rows_s, built = _cpu(lambda p: build_rows(p[0], p[1], settings, False), quads)
    # build_rows detects the language (not the frontmatter key: small), chunks and analyses.
    cpu["rows"] = max(0.0, rows_s - chunk_s - cpu["analysis"] - cpu["lang"])
    out: dict = {}
    if vectors:
        from vault_brain.embed.local import LocalEmbedder

        embedder = LocalEmbedder(EmbedSettings(model=""))
        start = time.process_time()
        embedder.dimension()
        load["static model"] = round(time.process_time() - start, 3)
        batches = [  # the chunks of 32 files per call, as a parse worker embeds them
            [embed_text(ch) for _, chunks, _ in built[at : at + 32] for ch in chunks]
            for at in range(0, len(built), 32)
        ]
        cpu["static vectors"], _ = _cpu(embedder.embed, batches)
        out["chunks"] = sum(len(b) for b in batches)
    total_s, _ = _cpu(lambda s: prepare(vault, s, None, settings, False), files)
    return {
        "code": str(Path(vault_brain.__file__).resolve().parents[1]),
        "notes": len(files),
        "load_cpu_s": load,
        "stage_cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "prepare_cpu_s": round(total_s, 3),
        **out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", default="cpp-docs", help="sample | obsidian | cpp-docs")
    parser.add_argument("--path", type=Path, help="an unpacked vault folder to use instead")
    parser.add_argument("--notes", type=int, default=0, help="the first N notes (0: all)")
    parser.add_argument("--rounds", type=int, default=1, help="medians over this many passes")
    parser.add_argument("--no-vectors", action="store_true")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="vb-parse-rows-"))
    try:
        vault = args.path or copy_vault(args.vault, tmp / "vault")
        runs = []
        for n in range(args.rounds):
            progress(f"round {n + 1}/{args.rounds}")
            runs.append(measure(vault, args.notes, not args.no_vectors))
        stages = [s for s in STAGES if s in runs[0]["stage_cpu_s"]]
        med = {s: round(statistics.median(r["stage_cpu_s"][s] for r in runs), 3) for s in stages}
        total = sum(med.values())
        record = {
            "machine": machine(),
            "commit": code_commit(),
            "vault": args.vault if args.path is None else str(args.path),
            "rounds": args.rounds,
            "median_stage_cpu_s": med,
            "median_prepare_cpu_s": statistics.median(r["prepare_cpu_s"] for r in runs),
            "runs": runs,
        }
        print(write_json(record, args.json_out))
        print()
        notes = runs[0]["notes"]
        rows = [
            (s, med[s], round(1e6 * med[s] / notes), f"{100 * med[s] / total:.0f} %")
            for s in stages
        ]
        rows.append(("sum of stages", round(total, 3), round(1e6 * total / notes), "100 %"))
        rows.append(("prepare (read → rows, one call)", record["median_prepare_cpu_s"], "", ""))
        print(markdown_table(["stage", "CPU s", "µs / note", "share"], rows))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
