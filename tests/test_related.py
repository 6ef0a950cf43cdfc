"""memory_get and `vault-brain get` name up to five related notes (issue 24 item 2): the
notes a note links to, then those linking to it, then the nearest by meaning; through the
CLI process and an MCP stdio client, on real files with the instant model's vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.server.harness import stdio_client_for
from tests.waiting import HANG_SECONDS

# The instant model only: vectors in a moment, no e5 to load.
LOCAL = {"VAULT_BRAIN_EMBED_PROVIDER": "local", "VAULT_BRAIN_EMBED_STRONG": "none"}

NOTES = {
    "Sourdough.md": (
        "---\nid: sour0001\nsummary: How I bake sourdough bread.\n---\n"
        "# Sourdough\n\nFeed the starter, mix flour and water, let the dough rise overnight, "
        "then bake the bread in a hot oven. Notes on gear in [[Garden shed]].\n"
    ),
    "Garden shed.md": "---\nid: shed0001\n---\n# Garden shed\n\nRakes, a wheelbarrow, seeds.\n",
    "Weekend.md": "---\nid: week0001\n---\n# Weekend\n\nSaturday: baked per [[Sourdough]].\n",
    "Rye loaf.md": (
        "---\nid: ryel0001\n---\n# Rye loaf\n\nA rye bread from a sourdough starter: flour, "
        "water, salt, a long rise, and the loaf baked in a hot oven.\n"
    ),
    "Tax return.md": "---\nid: taxr0001\n---\n# Tax return\n\nReceipts, forms, the deadline.\n",
    "Oil change.md": "---\nid: oilc0001\n---\n# Oil change\n\nEngine oil and the filter.\n",
    "Chess.md": "---\nid: ches0001\n---\n# Chess\n\nOpenings: the Sicilian defence.\n",
    "Tides.md": "---\nid: tide0001\n---\n# Tides\n\nHigh water at the harbour.\n",
}


def make_vault(root: Path) -> Path:
    root.mkdir()
    for rel, text in NOTES.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=180,
    )


def check_ranking(related: list[dict]) -> None:
    ids = [r["id"] for r in related]
    # out-link, back-link, then the nearest by meaning; five at most, no repeats, not itself
    assert ids[:3] == ["shed0001", "week0001", "ryel0001"], ids
    assert len(ids) == 5 and len(set(ids)) == 5 and "sour0001" not in ids
    assert related[2] == {
        "id": "ryel0001",
        "title": "Rye loaf",
        "summary": "A rye bread from a sourdough starter: flour, water, salt, a long rise, and "
        "the loaf baked in a hot oven.",
    }


def test_cli_get_names_link_neighbours_then_the_nearest_notes(tmp_path):
    vault = make_vault(tmp_path / "vault")
    r = run("index", "--vault", str(vault), env=LOCAL)
    assert r.returncode == 0, r.stderr
    r = run("get", "Sourdough", "--vault", str(vault), "--json", env=LOCAL)
    assert r.returncode == 0, r.stderr
    check_ranking(json.loads(r.stdout)["related"])
    r = run("get", "Sourdough", "--vault", str(vault), env=LOCAL)
    assert "related:\n  Garden shed (shed0001): Rakes, a wheelbarrow, seeds.\n  Weekend" in r.stdout


def test_without_vectors_related_holds_the_links_alone(tmp_path):
    vault = make_vault(tmp_path / "vault")
    none = {"VAULT_BRAIN_EMBED_PROVIDER": "none", "VAULT_BRAIN_EMBED_STRONG": "none"}
    r = run("get", "Sourdough", "--vault", str(vault), "--json", env=none)
    assert r.returncode == 0, r.stderr
    assert [n["id"] for n in json.loads(r.stdout)["related"]] == ["shed0001", "week0001"]
    r = run("get", "Chess", "--vault", str(vault), "--json", env=none)
    assert json.loads(r.stdout)["related"] == []


def test_memory_get_over_stdio_returns_related_with_id_title_summary(tmp_path):
    vault = make_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path, env=LOCAL)
    try:
        deadline = time.monotonic() + HANG_SECONDS
        related: list[dict] = []
        while time.monotonic() < deadline:  # vectors follow the first pass in the background
            related = client.ok("memory_get", {"id": "sour0001"})["related"]
            if len(related) == 5:
                break
            time.sleep(0.1)
        check_ranking(related)
        # A note's own link is dropped from the file: it leaves the link neighbours.
        note = client.ok("memory_get", {"id": "week0001"})
        assert [n["id"] for n in note["related"]][0] == "sour0001"
        client.ok(
            "memory_update",
            {"id": "week0001", "version": note["version"], "content": "Saturday: rested."},
        )
        after = [n["id"] for n in client.ok("memory_get", {"id": "sour0001"})["related"]]
        assert after[:2] == ["shed0001", "ryel0001"] and "week0001" not in after[:2]
    finally:
        client.close()
