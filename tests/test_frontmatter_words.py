"""A note's frontmatter `summary`, `title` and `aliases` are searchable like its title
(issue 21 item 4): through the CLI process and an MCP stdio client, on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.server.harness import stdio_client_for
from vault_brain.text import analysis

ENV = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}

# Each frontmatter word appears nowhere in the body, nor in any other note.
NOTE = (
    "---\ntitle: Harbour logbook\nsummary: How the quokka census is kept each spring.\n"
    "aliases: [kestrel ledger]\n---\n"
    "We count the animals on the island and write the numbers down.\n"
)
OTHER = "# Garden\n\nTomatoes, beans and a compost heap.\n"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env={**env, **ENV},
        timeout=120,
    )


def cli_paths(vault: Path, query: str) -> list[str]:
    r = run("search", query, "--vault", str(vault), "--json")
    assert r.returncode == 0, r.stderr
    return [h["path"] for h in json.loads(r.stdout)["results"]]


def make_vault(root: Path) -> Path:
    root.mkdir()
    (root / "Logbook.md").write_text(NOTE, encoding="utf-8")
    (root / "Garden.md").write_text(OTHER, encoding="utf-8")
    return root


def test_summary_alias_and_title_words_find_the_note_through_the_cli(tmp_path):
    vault = make_vault(tmp_path / "vault")
    assert cli_paths(vault, "quokka") == ["Logbook.md"]  # summary only
    assert cli_paths(vault, "kestrel") == ["Logbook.md"]  # alias only
    assert cli_paths(vault, "harbour") == ["Logbook.md"]  # frontmatter title only


def test_a_renamed_alias_and_a_new_summary_are_searchable_and_the_old_words_gone(tmp_path):
    vault = make_vault(tmp_path / "vault")
    assert cli_paths(vault, "kestrel") == ["Logbook.md"]
    text = NOTE.replace("kestrel ledger", "osprey ledger").replace("quokka", "wombat")
    (vault / "Logbook.md").write_text(text, encoding="utf-8")
    assert cli_paths(vault, "osprey") == ["Logbook.md"]
    assert cli_paths(vault, "wombat") == ["Logbook.md"]
    assert cli_paths(vault, "kestrel") == []
    assert cli_paths(vault, "quokka") == []


def test_summary_words_find_the_note_through_mcp_and_follow_an_update(tmp_path):
    vault = make_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path)
    try:
        # The first call waits for the server's first pass over this small vault.
        found = client.ok("memory_search", {"query": "quokka"})["results"]
        assert [h["path"] for h in found] == ["Logbook.md"]
        assert [h["path"] for h in client.ok("memory_search", {"query": "kestrel"})["results"]] == [
            "Logbook.md"
        ]
        note = client.ok("memory_get", {"id": "Logbook.md"})
        client.ok(
            "memory_update",
            {"id": note["id"], "version": note["version"], "summary": "Where the puffins nest."},
        )
        found = client.ok("memory_search", {"query": "puffins"})["results"]
        assert [h["path"] for h in found] == ["Logbook.md"]
        assert client.ok("memory_search", {"query": "quokka"})["results"] == []
    finally:
        client.close()


def test_an_index_built_before_summaries_were_searchable_is_reanalysed(vault, make_brain):
    """An index whose rows were built without the summary (the meta records the analyser
    alone, as before) is analysed again at the next sync, with no edit to any file."""
    plain = "---\nsummary: Short one.\n---\nA note about the island.\n"
    path = vault.write("Logbook.md", plain)
    # Saved a day before it was indexed: the stat pass trusts its mtime (one within a
    # tick of the index run is hashed again, index/sync.py).
    day_ago = time.time_ns() - 86_400 * 10**9
    os.utime(path, ns=(day_ago, day_ago))
    first = make_brain()
    assert [h.path for h in first.search("island", mode="fts").hits] == ["Logbook.md"]
    # Same size and mtime: the stat pass takes the file as unchanged, so its rows stay
    # those built from the old bytes, as an index from before this change holds them.
    path.write_text(plain.replace("Short one", "Quokkas!!"), encoding="utf-8")
    os.utime(path, ns=(day_ago, day_ago))
    first.sync()
    assert first.search("quokkas", mode="fts").hits == []
    with first.index.transaction() as w:  # what the code before this change recorded
        w.set_meta("text_analyzer", analysis.identity(first.settings.text.languages))
    first.close()
    second = make_brain()
    assert [h.path for h in second.search("quokkas", mode="fts").hits] == ["Logbook.md"]
