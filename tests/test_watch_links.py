"""The watcher follows folder symlinks by the scanner's rules (issue 11, item 21): a link
made while it runs is indexed when (and only when) a full reindex would index it, edits
inside a linked folder the owner trusts are seen, and a link into the vault never gives
its notes a second path."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.settle import settle
from tests.waiting import HANG_SECONDS
from vault_brain.config import load_settings
from vault_brain.service import Brain


def settings_for(vault: Path, trusted: list[str] | None = None, index: str = ""):
    return load_settings(
        vault=str(vault),
        env={},
        overrides={
            "embed": {"provider": "none"},
            "vault": {"follow_outside": trusted or []},
            "index": {"path": index},
            "watch": {"debounce_ms": 50},
        },
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def fresh(vault: Path, tmp_path: Path, trusted: list[str] | None = None) -> dict:
    index = tmp_path / f"fresh-{time.monotonic_ns()}" / "index.db"
    with Brain(settings_for(vault, trusted, str(index))) as brain:
        brain.sync(full=True)
        return brain.snapshot()


def paths(brain: Brain, query: str) -> list[str]:
    return sorted(h.path for h in brain.search(query, mode="fts", limit=50).hits)


@pytest.fixture
def world(tmp_path: Path):
    vault = tmp_path / "vault"
    write(vault / "Home.md", "# Home\n\nstart here\n")
    write(vault / "Inside/Real.md", "# Real\n\nquetzal inside the vault\n")
    outside = tmp_path / "outside"
    write(outside / "Shared/Plan.md", "# Plan\n\npangolin outside the vault\n")
    return vault, outside


def test_a_link_to_a_trusted_folder_made_while_watching_is_indexed_and_followed(world, tmp_path):
    vault, outside = world
    trusted = [str(outside)]
    with Brain(settings_for(vault, trusted)) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        os.symlink(outside / "Shared", vault / "Linked")
        settle(brain)
        assert paths(brain, "pangolin") == ["Linked/Plan.md"]
        write(outside / "Shared/Plan.md", "# Plan\n\nnow about a tapir\n")
        write(outside / "Shared/New.md", "# New\n\ntapir again\n")
        settle(brain)
        assert paths(brain, "tapir") == ["Linked/New.md", "Linked/Plan.md"]
        assert paths(brain, "pangolin") == []
        got = brain.snapshot()
    assert got == fresh(vault, tmp_path, trusted)


def test_a_link_to_an_untrusted_folder_made_while_watching_is_not_indexed(world, tmp_path):
    vault, outside = world
    with Brain(settings_for(vault)) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        os.symlink(outside / "Shared", vault / "Linked")
        settle(brain)
        assert paths(brain, "pangolin") == []
        got = brain.snapshot()
    assert got == fresh(vault, tmp_path)


def test_a_folder_link_named_like_a_note_never_indexes_notes_twice(world, tmp_path):
    vault, _ = world
    with Brain(settings_for(vault)) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        os.symlink(vault / "Inside", vault / "Twice.md")
        settle(brain)
        assert paths(brain, "quetzal") == ["Inside/Real.md"]
        got = brain.snapshot()
    assert got == fresh(vault, tmp_path)


def test_removing_a_folder_link_removes_its_notes(world, tmp_path):
    vault, outside = world
    trusted = [str(outside)]
    os.symlink(outside / "Shared", vault / "Linked")
    with Brain(settings_for(vault, trusted)) as brain, brain.indexer as indexer:
        assert indexer.wait_idle(HANG_SECONDS)
        assert paths(brain, "pangolin") == ["Linked/Plan.md"]
        os.unlink(vault / "Linked")
        settle(brain)
        assert paths(brain, "pangolin") == []
        got = brain.snapshot()
    assert got == fresh(vault, tmp_path, trusted)
