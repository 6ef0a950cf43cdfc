"""How often the analyser's language detector names a note's language right.

Every note of the translated Obsidian Help vaults (33 locales in `obsidian-help-i18n.tar.gz`
plus English from `obsidian-help.tar.gz`, 173 notes each) is parsed like the indexer does
and run through `analysis.note_language` with no configured languages; the expected
language is the locale (pt-br -> pt, zh-TW -> zh). Prints accuracy per locale, the
confusions, and the time per note.

    .venv/bin/python -m bench.detect [--locales de,fr] [--json-out f]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, shared_dir, unpack, write_json  # noqa: E402

LOCALES = (
    "en ar bn ca cs da de el es fa fi fr he hu id it ja km ko nl no pl pt pt-br ro ru sk sv "
    "th tr uk vi zh zh-TW"
).split()


def expected(locale: str) -> str:
    return {"pt-br": "pt", "zh-TW": "zh"}.get(locale, locale)


def main(argv: list[str] | None = None) -> int:
    from vault_brain.text.analysis import frontmatter_language, note_language
    from vault_brain.vault.note import parse_note

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locales", default=",".join(LOCALES))
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    corpora = shared_dir() / "corpora"
    rows, results, seconds, total = [], {}, 0.0, 0
    with tempfile.TemporaryDirectory(prefix="vb-detect-") as tmp:
        for locale in args.locales.split(","):
            if locale == "en":
                vault = unpack(corpora / "obsidian-help.tar.gz", "obsidian-help/en", Path(tmp))
            else:
                vault = unpack(
                    corpora / "obsidian-help-i18n.tar.gz", f"obsidian-help-i18n/{locale}", Path(tmp)
                )
            got: Counter[str] = Counter()
            for path in sorted(vault.rglob("*.md")):
                raw = path.read_bytes()
                note = parse_note(path.relative_to(vault).as_posix(), raw)
                text = raw.decode("utf-8")
                started = time.perf_counter()
                lang = note_language(f"{note.title}\n\n{note.body}", frontmatter_language(text), ())
                seconds += time.perf_counter() - started
                total += 1
                got[lang] += 1
            notes = sum(got.values())
            right = got[expected(locale)]
            wrong = ", ".join(f"{k} {v}" for k, v in got.most_common() if k != expected(locale))
            results[locale] = {"notes": notes, "right": right, "detected": dict(got)}
            rows.append([locale, notes, right, right / notes if notes else 0.0, wrong or "–"])
    right = sum(r["right"] for r in results.values())
    notes = sum(r["notes"] for r in results.values())
    print(markdown_table(["locale", "notes", "right", "accuracy", "detected instead"], rows))
    print(
        f"\nall: {right}/{notes} = {right / notes:.4f}; "
        f"{1000 * seconds / max(1, total):.2f} ms per note"
    )
    write_json({"machine": machine(), "accuracy": right / notes, "locales": results}, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
