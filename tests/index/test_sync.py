"""Sync: files → index, incremental, and always equal to a full rebuild."""

from __future__ import annotations

import os
import shutil
import time

from tests.conftest import every_backend
from vault_brain.index.sync import BATCH_NOTES, LINKS_PENDING
from vault_brain.service import Brain

backend = every_backend()

NOTE_A = """---
id: alpha001
title: Alpha plan
tags: [project]
---
# Alpha plan

We ship the alpha in March. See [[Beta notes]] and [[Gamma#Risks|the risks]].
"""

NOTE_B = "# Beta notes\n\nBeta depends on the alpha shipping. #project/beta\n"


def _fresh_snapshot(brain: Brain, make_brain, index_settings) -> dict:
    """A brand-new index over the same vault, built from scratch."""
    other = make_brain(index=index_settings("fresh"))
    return other.snapshot()


def test_new_notes_are_indexed_with_links_and_tags(vault, brain):
    vault.write("Projects/Alpha.md", NOTE_A)
    vault.write("Beta notes.md", NOTE_B)
    report = brain.sync()
    assert (report.added, report.updated, report.removed) == (2, 0, 0)
    snap = brain.snapshot()
    assert [n[0] for n in snap["notes"]] == ["Beta notes.md", "Projects/Alpha.md"]
    assert ("Projects/Alpha.md", "project") in snap["tags"]
    assert ("Beta notes.md", "project/beta") in snap["tags"]
    targets = [link[2] for link in snap["links"] if link[0] == "Projects/Alpha.md"]
    assert targets == ["Beta notes", "Gamma"]


def test_unchanged_vault_sync_does_nothing(vault, brain):
    vault.write("a.md", NOTE_B)
    brain.sync()
    report = brain.sync()
    assert report.changed == 0
    assert report.unchanged == 1


def test_touch_without_change_is_not_reindexed(vault, brain):
    path = vault.write("a.md", NOTE_B)
    brain.sync()
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    report = brain.sync()
    assert report.updated == 0 and report.unchanged == 1


def test_modified_note_is_reindexed(vault, brain):
    vault.write("a.md", NOTE_B)
    brain.sync()
    vault.write("a.md", NOTE_B + "\nA new paragraph about zeppelins.\n")
    report = brain.sync()
    assert report.updated == 1
    assert brain.search("zeppelins", mode="fts").hits[0].path == "a.md"


def test_a_same_size_rewrite_within_one_mtime_tick_is_indexed(vault, brain):
    """A file system keeps mtimes to a tick (2 s on FAT, 1 s on HFS+ and some network
    shares, a few ms on a coarse kernel clock): a note saved twice within one tick, same
    size, keeps its mtime. The second save must still reach the index. The tick is pinned
    here (an mtime that has not passed yet), so the test does not depend on the clock."""
    path = vault.write("a.md", "# Tick\n\nThe first heron.\n")
    tick = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(tick, tick))
    brain.sync()
    vault.write("a.md", "# Tick\n\nThe second ibis.\n")
    os.utime(path, ns=(tick, tick))
    assert path.stat().st_size == len("# Tick\n\nThe first heron.\n")
    report = brain.sync()
    assert report.updated == 1
    assert [h.path for h in brain.search("ibis", mode="fts").hits] == ["a.md"]
    assert brain.search("heron", mode="fts").hits == []


def test_deleted_note_leaves_the_index(vault, brain):
    vault.write("a.md", NOTE_B)
    brain.sync()
    vault.remove("a.md")
    report = brain.sync()
    assert report.removed == 1
    assert brain.snapshot()["notes"] == []
    assert brain.search("beta", mode="fts").hits == []


def test_renamed_note_with_frontmatter_id_keeps_its_id(vault, brain):
    vault.write("Projects/Alpha.md", NOTE_A)
    brain.sync()
    os.rename(vault.root / "Projects/Alpha.md", vault.root / "Projects/Alpha renamed.md")
    brain.sync()
    assert brain.get("alpha001").path == "Projects/Alpha renamed.md"


def test_folder_move_is_followed(vault, brain):
    vault.write("Projects/Alpha.md", NOTE_A)
    vault.write("Projects/Beta notes.md", NOTE_B)
    brain.sync()
    shutil.move(str(vault.root / "Projects"), str(vault.root / "Archive"))
    brain.sync()
    paths = [n[0] for n in brain.snapshot()["notes"]]
    assert paths == ["Archive/Alpha.md", "Archive/Beta notes.md"]


def test_sync_paths_handles_a_moved_folder(vault, brain):
    vault.write("Projects/Alpha.md", NOTE_A)
    brain.sync()
    shutil.move(str(vault.root / "Projects"), str(vault.root / "Archive"))
    brain.sync_paths(["Projects", "Archive"])
    assert [n[0] for n in brain.snapshot()["notes"]] == ["Archive/Alpha.md"]
    assert brain.get("alpha001").path == "Archive/Alpha.md"


def test_incremental_sync_equals_full_reindex(vault, brain, make_brain, index_settings):
    vault.write("Projects/Alpha.md", NOTE_A)
    vault.write("Beta notes.md", NOTE_B)
    vault.write("c.md", "# C\n\nlinks to [[Alpha plan]]\n")
    brain.sync()
    vault.write("Beta notes.md", NOTE_B + "\nmore text\n")
    vault.remove("c.md")
    vault.write("d/e.md", "plain note without heading")
    brain.sync()
    assert brain.snapshot() == _fresh_snapshot(brain, make_brain, index_settings)


def test_full_reindex_of_unchanged_vault_gives_same_index(vault, brain):
    vault.write("Projects/Alpha.md", NOTE_A)
    vault.write("Beta notes.md", NOTE_B)
    brain.sync()
    before = brain.snapshot()
    brain.sync(full=True)
    assert brain.snapshot() == before


def test_two_files_with_one_frontmatter_id_both_stay_findable(vault, brain):
    vault.write("a.md", NOTE_A)
    vault.write("b.md", NOTE_A.replace("Alpha plan", "Alpha copy"))
    brain.sync()
    ids = {n[0]: n[1] for n in brain.snapshot()["notes"]}
    assert ids["a.md"] == "alpha001"
    assert ids["b.md"] != "alpha001"


def test_invalid_utf8_file_is_skipped_and_others_indexed(vault, brain):
    vault.write("good.md", NOTE_B)
    vault.write("bad.md", b"# Bad\n\xff\xfe\xfa not utf-8\n")
    report = brain.sync()
    assert report.skipped >= 1
    assert [n[0] for n in brain.snapshot()["notes"]] == ["good.md"]


def test_note_that_becomes_invalid_utf8_leaves_the_index(vault, brain):
    vault.write("a.md", NOTE_B)
    brain.sync()
    vault.write("a.md", b"\xff\xfe broken")
    brain.sync()
    assert brain.snapshot()["notes"] == []


def test_malformed_frontmatter_is_indexed_from_its_text(vault, brain):
    vault.write("m.md", "---\ntitle: [unclosed\n---\n# Malformed\n\nstill searchable walrus\n")
    brain.sync()
    assert brain.search("walrus", mode="fts").hits[0].path == "m.md"


def test_indexing_never_writes_to_user_files(vault, brain):
    path = vault.write("a.md", NOTE_A)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    brain.sync(full=True)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_ignored_folders_are_not_indexed(vault, brain):
    vault.write(".obsidian/workspace.md", "# nope")
    vault.write(".trash/old.md", "# nope")
    vault.write("build/Notes on builds.md", "# Builds\n\nA vault is not a code repo.\n")
    brain.sync()
    assert [n[0] for n in brain.snapshot()["notes"]] == ["build/Notes on builds.md"]


def test_configured_ignore_globs_are_skipped(vault, make_brain):
    vault.write("Templates/t.md", "# template")
    vault.write("keep.md", "# keep")
    brain = make_brain(vault={"ignore": ["Templates"]})
    assert [n[0] for n in brain.snapshot()["notes"]] == ["keep.md"]


def test_oversize_file_is_skipped(vault, make_brain):
    vault.write("big.md", "# Big\n\n" + "word " * 3000)
    vault.write("small.md", "# Small")
    brain = make_brain(vault={"max_file_bytes": 10_000})
    assert [n[0] for n in brain.snapshot()["notes"]] == ["small.md"]


def test_symlink_loop_does_not_hang_or_crash(vault, brain):
    vault.write("real/a.md", NOTE_B)
    os.symlink(vault.root / "real", vault.root / "real" / "loop")
    report = brain.sync()
    paths = [n[0] for n in brain.snapshot()["notes"]]
    assert "real/a.md" in paths
    assert report.scanned < 10


def test_unreadable_folder_keeps_its_notes_in_the_index(vault, brain, monkeypatch):
    vault.write("Private/secret plans.md", "# Plans\n\nquokka\n")
    vault.write("open.md", NOTE_B)
    brain.sync()
    real_scandir = os.scandir

    def failing_scandir(path="."):
        if str(path).rstrip("/").endswith("Private"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", failing_scandir)
    brain.sync()
    monkeypatch.undo()
    assert "Private/secret plans.md" in [n[0] for n in brain.snapshot()["notes"]]


def test_a_touch_moves_sort_time_as_a_rebuild_would(vault, brain, make_brain, index_settings):
    old = vault.write("Old.md", "# Old\n\nno dates in here\n")
    vault.write("New.md", "# New\n\nno dates either\n")
    os.utime(old, ns=(old.stat().st_atime_ns, old.stat().st_mtime_ns - 86_400 * 10**9))
    brain.sync()
    assert [n.path for n in brain.list().notes] == ["New.md", "Old.md"]
    os.utime(old, ns=(old.stat().st_atime_ns, old.stat().st_mtime_ns + 2 * 86_400 * 10**9))
    report = brain.sync()
    assert report.updated == 0  # the same bytes: not re-parsed
    assert [n.path for n in brain.list().notes] == ["Old.md", "New.md"]
    assert brain.snapshot() == _fresh_snapshot(brain, make_brain, index_settings)


def _chain(vault, count: int) -> None:
    """`count` notes, each linking to the next and the one before (links across batches)."""
    for i in range(count):
        vault.write(
            f"n/{i:04d}.md",
            f"# Note {i}\n\nNext: [[{(i + 1) % count:04d}]], [[{(i - 1) % count:04d}]].\n",
        )


def test_a_pass_of_many_batches_resolves_every_link(vault, make_brain):
    count = 2 * BATCH_NOTES + 50  # more than one transaction
    _chain(vault, count)
    brain = make_brain()
    links = brain.snapshot()["links"]
    assert len(links) == 2 * count
    assert all(target == f"n/{key}.md" for _, _, key, _, _, _, target in links)
    with brain.index.read() as r:
        assert r.get_meta(LINKS_PENDING) is None


def test_the_stored_stats_come_in_the_order_the_stat_pass_sorts_paths(vault, brain):
    """A pass that finds the vault as stored compares the scan's sorted list with the
    index's own (one comparison, no stat per note); both backends must order paths by code
    point, as Python does, or every such pass falls back to the slow comparison."""
    names = [
        "Zeta.md",
        "alpha.md",
        "Ärger.md",
        "é/b.md",
        "e/b.md",
        "日本.md",
        "𝔸 math.md",
        "a b.md",
    ]
    for name in names:
        vault.write(name, f"# {name}\n\nText of {name}.\n")
    brain.sync()
    with brain.index.read() as r:
        stored = r.note_stats()
    assert [path for path, _, _ in stored] == sorted(names)
    assert brain.sync().unchanged == len(names)
