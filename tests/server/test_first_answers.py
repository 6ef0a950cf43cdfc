"""A client connected to a never-indexed vault gets honest first answers: never "nothing
relevant" and never NOT_FOUND for a note that exists, while or after the first pass runs.
Real stdio servers on fresh copies of sample_vault, default models, counted over rounds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.server.harness import stdio_client_for

# 20 stdio servers with the default models, and a 12,000-note vault: the slow tail.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 20
NOTES_IN_SAMPLE = 32


def test_first_answers_of_a_never_indexed_vault_are_never_wrong_over_20_rounds(tmp_path):
    wrong: list[str] = []
    partial = 0
    for n in range(ROUNDS):
        vault = tmp_path / f"vault-{n}"
        shutil.copytree(REPO / "sample_vault", vault, ignore=shutil.ignore_patterns(".vault-brain"))
        assert len(list(vault.rglob("*.md"))) == NOTES_IN_SAMPLE
        client = stdio_client_for(vault, tmp_path, env={"VAULT_BRAIN_EMBED_PROVIDER": "local"})
        try:
            found = client.ok("memory_search", {"query": "how do we deploy to production"})
            got = client.call("memory_get", {"id": "Deploy to production"})
            listed = client.ok("memory_list", {"limit": 100})
        finally:
            client.close()
        paths = [r["path"] for r in found["results"]]
        if found.get("nothing_relevant"):
            wrong.append(f"round {n}: search said nothing_relevant ({found})")
        elif "indexing" not in found and "How-to/Deploy to production.md" not in paths:
            wrong.append(f"round {n}: a complete search missed the note: {paths}")
        if got.is_error and got.data["code"] == "NOT_FOUND":
            wrong.append(f"round {n}: memory_get said NOT_FOUND")
        elif got.is_error:
            assert got.data["code"] == "UNAVAILABLE" and got.data["retryable"], got.text
        if "indexing" in listed:
            partial += 1
        elif len(listed["notes"]) != NOTES_IN_SAMPLE:
            wrong.append(f"round {n}: a complete list held {len(listed['notes'])} notes")
    assert not wrong, (
        f"{len(wrong)} wrong first answers of {ROUNDS} rounds ({partial} partial lists):\n"
        + "\n".join(wrong)
    )


def test_during_a_long_first_pass_lookups_say_not_indexed_yet_or_index_the_file(tmp_path):
    """A 12,000-note vault: the first calls answer at once, partial and saying so; a note
    not reached yet is UNAVAILABLE "not indexed yet" by title (retryable), and found by its
    path (indexed on demand) — never NOT_FOUND; a search never says nothing_relevant."""
    from tests.server.test_first_index import big_vault

    vault = big_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path)
    try:
        found = client.ok("memory_search", {"query": "zebra crossing at midnight"})
        by_title = client.call("memory_get", {"id": "Note 11999"})
        by_path = client.call("memory_get", {"id": "Area 24/Note 11999.md"})
        missing = client.call("memory_get", {"id": "No such note anywhere"})
    finally:
        client.close()
    if "indexing" in found:
        assert "nothing_relevant" not in found
    else:  # the machine indexed 12,000 notes before the first search: a complete answer
        assert found.get("nothing_relevant") is True
    assert not by_path.is_error, by_path.text
    assert by_path.data["path"] == "Area 24/Note 11999.md"
    if by_title.is_error:
        assert by_title.data["code"] == "UNAVAILABLE" and by_title.data["retryable"]
        assert "not indexed yet" in by_title.data["message"]
        assert missing.data["code"] in ("UNAVAILABLE", "NOT_FOUND")
    else:
        assert by_title.data["title"] == "Note 11999"
