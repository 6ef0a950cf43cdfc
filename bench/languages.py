"""Known-item search across languages on the translated Obsidian Help vaults.

Each locale of `obsidian-help-i18n.tar.gz` is the same 173 notes translated. A note whose
frontmatter has a `description` (a sentence written for search engines, in the note's
language) gives a query: the description is frontmatter, so it is not indexed, and the
note it came from is the one right answer. MRR@10 and hit@3 per locale and mode show
whether full text works in scripts without spaces (zh, ja: character bigrams), in Cyrillic
and Thai, and what the English-only static model adds or costs.

    .venv/bin/python -m bench.languages [--locales en,zh,ja,ko,ru,th] [--embedder local|e5[:wN]]
        [--vector-weight W] [--json-out f]
"""

from __future__ import annotations

import argparse
import tarfile
import tempfile
from pathlib import Path

import frontmatter

from bench.common import (
    bench_model,
    machine,
    markdown_table,
    mrr_at_k,
    progress,
    shared_dir,
    write_json,
)
from vault_brain import log
from vault_brain.config import load_settings
from vault_brain.embed import Embedder
from vault_brain.service import Brain

MODES = ("fts", "vector", "hybrid")


def unpack(locale: str, into: Path) -> Path:
    """One locale (or the English vault) of the Obsidian Help corpus, unpacked into `into`."""
    corpora = shared_dir() / "corpora"
    if locale == "en":
        archive, prefix = corpora / "obsidian-help.tar.gz", "obsidian-help/en/"
    else:
        archive, prefix = corpora / "obsidian-help-i18n.tar.gz", f"obsidian-help-i18n/{locale}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(into, members=members, filter="data")
    return into / prefix


def known_items(vault: Path) -> list[tuple[str, str]]:
    """(description, vault-relative path) for every note that has a description."""
    items = []
    for path in sorted(vault.rglob("*.md")):
        try:
            post = frontmatter.load(path)
        except Exception:  # noqa: BLE001 - a note we cannot read gives no query
            continue
        description = post.metadata.get("description")
        if isinstance(description, str) and description.strip():
            items.append((description.strip(), path.relative_to(vault).as_posix()))
    return items


def make_bench_embedder(spec: str) -> Embedder | str:
    """`local` (the configured model2vec default) or `e5[:wN]` (the strong tier, window N)."""
    if spec == "local":
        return "auto"
    name, _, window = spec.partition(":w")
    if name != "e5":
        raise SystemExit(f"--embedder: expected local or e5[:wN], got {spec!r}")
    from vault_brain.embed.e5 import DEFAULT_MAX_TOKENS, E5Embedder

    return E5Embedder(max_tokens=int(window) if window else DEFAULT_MAX_TOKENS)


def run_locale(
    locale: str, work: Path, embedder_spec: str = "local", vector_weight: float | None = None
) -> dict[str, object]:
    vault = unpack(locale, work / locale)
    overrides: dict = {"embed": {"provider": "local", "model": bench_model()}}
    if vector_weight is not None:
        overrides["search"] = {"vector_weight": vector_weight}
    settings = load_settings(vault=str(vault), env={}, overrides=overrides)
    brain = Brain(settings, embedder=make_bench_embedder(embedder_spec))
    try:
        brain.sync()
        while brain.embed_pending():
            pass
        items = known_items(vault)
        out: dict[str, object] = {
            "locale": locale,
            "queries": len(items),
            "embedder": brain.embedder.name if brain.embedder else None,
            "vector_weight": settings.search.vector_weight,
        }
        for mode in MODES:
            mrr = hit3 = 0.0
            for query, path in items:
                ranked = [h.path for h in brain.search(query, limit=10, mode=mode).hits]
                mrr += mrr_at_k(ranked, {path: 1.0}, 10)
                hit3 += path in ranked[:3]
            n = max(1, len(items))
            out[f"{mode}_mrr"] = round(mrr / n, 3)
            out[f"{mode}_hit3"] = round(hit3 / n, 3)
        return out
    finally:
        brain.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locales", default="en,ru,zh,ja,ko,de,fr,es,ar,th,km")
    parser.add_argument("--embedder", default="local", help="local, or e5[:wN] (strong tier)")
    parser.add_argument("--vector-weight", type=float, default=None, help="fusion weight")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args()
    log.set_quiet(True)
    results = []
    with tempfile.TemporaryDirectory(prefix="vb-languages-") as tmp:
        for locale in args.locales.split(","):
            progress(f"{locale}: indexing and searching")
            results.append(run_locale(locale.strip(), Path(tmp), args.embedder, args.vector_weight))
    rows = [
        [r["locale"], r["queries"]] + [f"{r[f'{m}_mrr']:.3f} / {r[f'{m}_hit3']:.2f}" for m in MODES]
        for r in results
    ]
    headers = ["locale", "queries"] + [f"{m} MRR@10 / hit@3" for m in MODES]
    print(markdown_table(headers, rows))
    print(write_json({"machine": machine(), "results": results}, args.json_out))


if __name__ == "__main__":
    main()
