"""A one-shot CLI search with no watcher first catches up every change a user made to the
files since the last pass (its refresh pass), whatever the change: an edit in place (its
folder's mtime does not move), a rename, an addition in a new folder, a deletion, a second
same-size save within one mtime tick. Real processes on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ENV = {"VAULT_BRAIN_EMBED_PROVIDER": "none", "VAULT_BRAIN_SEARCH_KEEP_WARM": "0"}


def run(*args: str, argv: tuple[str, ...] = ("-m", "vault_brain")) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env.update(ENV)
    return subprocess.run(
        [sys.executable, *argv, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def found(vault, query: str) -> list[str]:
    """The paths a one-shot full-text search of `query` answers, in order."""
    r = run("search", query, "--vault", str(vault.root), "--mode", "fts", "--json")
    assert r.returncode == 0, r.stderr
    return [hit["path"] for hit in json.loads(r.stdout)["results"]]


def pin_mtime(path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


@pytest.fixture
def indexed(vault):
    """A vault of a few folders, indexed an hour after its notes' mtimes (so no note is
    stored as 'saved within one tick'), then searched once (a pass that finds it as
    stored)."""
    an_hour_ago = time.time_ns() - 3600 * 10**9
    for folder in ("a", "a/deep", "b"):
        for k in range(3):
            path = vault.write(
                f"{folder}/n{k}.md", f"# Note mark{folder.replace('/', '')}{k}\n\nPlain words.\n"
            )
            pin_mtime(path, an_hour_ago)
    r = run("index", "--vault", str(vault.root))
    assert r.returncode == 0, r.stderr
    assert found(vault, "plain") != []
    return vault


def test_an_edit_in_place_is_found_though_its_folder_did_not_change(indexed):
    folder = indexed.root / "a" / "deep"
    before = folder.stat().st_mtime_ns
    path = folder / "n1.md"
    with open(path, "r+", encoding="utf-8") as f:  # in place: no new directory entry
        f.seek(0, os.SEEK_END)
        f.write("A wandering albatross.\n")
    pin_mtime(folder, before)
    assert folder.stat().st_mtime_ns == before
    assert found(indexed, "albatross") == ["a/deep/n1.md"]


def test_a_renamed_note_is_found_under_its_new_path_only(indexed):
    os.rename(indexed.root / "a" / "n2.md", indexed.root / "b" / "moved.md")
    assert found(indexed, "marka2") == ["b/moved.md"]
    assert "a/n2.md" not in found(indexed, "plain")


def test_a_note_added_in_a_new_folder_is_found(indexed):
    indexed.write("c/d/e/new.md", "# New\n\nA quokka smiled.\n")
    assert found(indexed, "quokka") == ["c/d/e/new.md"]


def test_a_deleted_note_is_no_longer_found(indexed):
    indexed.remove("b/n0.md")
    assert "b/n0.md" not in found(indexed, "plain")
    assert found(indexed, "markb0") == []


def test_a_second_same_size_save_within_one_mtime_tick_is_found(vault):
    """A file system keeps mtimes to a tick: a note saved twice within one, same size,
    keeps its stat. The pass that stored the first save (in another process) must have
    left it to be read again. The tick is pinned (an mtime that has not passed yet)."""
    path = vault.write("x/tick.md", "# Tick\n\nThe first heron.\n")
    tick = time.time_ns() + 3600 * 10**9
    pin_mtime(path, tick)
    assert found(vault, "heron") == ["x/tick.md"]  # the first pass stores it
    path.write_text("# Tick\n\nThe other ibis.\n", encoding="utf-8")
    pin_mtime(path, tick)
    assert found(vault, "ibis") == ["x/tick.md"]
    assert found(vault, "heron") == []


def test_every_change_of_one_pass_is_found_at_once(indexed):
    """Several kinds of change between two searches: one pass takes them all."""
    with open(indexed.root / "a" / "n0.md", "a", encoding="utf-8") as f:
        f.write("Seen by a pelican.\n")
    indexed.remove("a/deep/n2.md")
    indexed.write("b/n9.md", "# Nine\n\nSeen by a pelican too.\n")
    os.rename(indexed.root / "b" / "n1.md", indexed.root / "b" / "renamed.md")
    assert sorted(found(indexed, "pelican")) == ["a/n0.md", "b/n9.md"]
    paths = found(indexed, "plain")
    assert "a/deep/n2.md" not in paths and "b/n1.md" not in paths
    assert "b/renamed.md" in paths


# The CLI's own search in a real process that reports, after it, which of the parser's
# modules it imported (entry.main returns where the executable would end the process).
_REPORTING = """
import sys
from vault_brain import entry
sys.argv = ["vault-brain", *sys.argv[1:]]
entry.main()
parser = [m for m in ("vault_brain.index.prepare", "vault_brain.vault.note") if m in sys.modules]
sys.stderr.write("parser imported: %s\\n" % ",".join(parser))
"""


def _reporting_search(vault, query: str) -> tuple[list[str], str]:
    args = ["search", query, "--vault", str(vault.root), "--mode", "fts", "--json"]
    r = run(*args, argv=("-c", _REPORTING))
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stderr.splitlines() if x.startswith("parser imported:")][-1]
    return [hit["path"] for hit in json.loads(r.stdout)["results"]], line.split(":", 1)[1].strip()


def test_a_touched_note_is_told_unchanged_by_its_hash_without_the_parser(indexed):
    """A note whose mtime moved but whose bytes did not (a sync tool, an editor saving the
    same text, a checkout) is read and hashed by the search's pass, which then needs no
    parser; its next stat matches again. A note whose bytes did change still is parsed."""
    path = indexed.root / "b" / "n2.md"
    half_an_hour_ago = time.time_ns() - 1800 * 10**9  # moved, and older than one mtime tick
    pin_mtime(path, half_an_hour_ago)
    assert _reporting_search(indexed, "markb2") == (["b/n2.md"], "")
    assert _reporting_search(indexed, "markb2") == (["b/n2.md"], "")  # its stat matches now
    with open(path, "a", encoding="utf-8") as f:
        f.write("A heron at dawn.\n")
    pin_mtime(path, half_an_hour_ago + 10**9)
    hits, parser = _reporting_search(indexed, "heron")
    assert hits == ["b/n2.md"]
    assert parser == "vault_brain.index.prepare,vault_brain.vault.note"
