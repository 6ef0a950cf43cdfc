"""Full text in scripts without spaces, on real translated notes (Obsidian Help, zh and ja).

A note's frontmatter `description` is not indexed; asked as a question, it must find its
own note near the top. Plain unicode61 tokenization finds almost nothing here; character
bigrams do (bench/languages.py has the full table)."""

from __future__ import annotations

import tarfile

import frontmatter
import pytest

from tests.conftest import shared_path

# The shared 34-language corpus: the slow tail.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("locale", ["zh", "ja", "th"])
def test_descriptions_find_their_notes_in_cjk(locale, tmp_path):
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    archive = shared_path("corpora", "obsidian-help-i18n.tar.gz")
    prefix = f"obsidian-help-i18n/{locale}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(tmp_path, members=members, filter="data")
    vault = tmp_path / prefix
    queries = []
    for path in sorted(vault.rglob("*.md")):
        description = frontmatter.load(path).metadata.get("description")
        if isinstance(description, str) and description.strip():
            queries.append((description, path.relative_to(vault).as_posix()))
    assert len(queries) >= 50
    settings = load_settings(vault=str(vault), env={}, overrides={"embed": {"provider": "none"}})
    with Brain(settings) as brain:
        brain.sync()
        found = sum(
            path in [h.path for h in brain.search(q, limit=3, mode="fts").hits]
            for q, path in queries
        )
    assert found / len(queries) >= 0.8, f"{found}/{len(queries)} found in the top 3"


@pytest.mark.parametrize("locale", ["de", "fr", "ru", "uk", "ja", "th", "pl", "no"])
def test_the_detector_names_the_locale_of_nearly_every_translated_note(locale, tmp_path):
    from vault_brain.text.analysis import frontmatter_language, note_language
    from vault_brain.vault.note import parse_note

    archive = shared_path("corpora", "obsidian-help-i18n.tar.gz")
    prefix = f"obsidian-help-i18n/{locale}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(tmp_path, members=members, filter="data")
    right = total = 0
    for path in sorted((tmp_path / prefix).rglob("*.md")):
        raw = path.read_bytes()
        note = parse_note(path.name, raw)
        lang = note_language(f"{note.title}\n\n{note.body}", frontmatter_language(raw.decode()), ())
        right += lang == locale
        total += 1
    assert total == 173
    # bench/detect.py has all 34 locales; a list of contributors' names is Latin anywhere.
    assert right / total >= 0.97, f"{right}/{total} detected as {locale}"
