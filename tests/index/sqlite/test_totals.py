"""FTS5's row and word totals (index/sqlite/totals.py), what bm25() weighs words with, stay
what a fresh index of the same files has: through deletes, a transaction rolled back, and
an index an earlier version wrote (whose deletes never left the totals)."""

from __future__ import annotations

import pytest

from tests.index.test_fulltext import assert_same_scores, drift_vault, text_scores
from vault_brain.index.sqlite import totals
from vault_brain.index.sqlite.db import connect


def test_varints_read_back_as_written():
    values = [0, 1, 127, 128, 16_383, 16_384, 2**35 + 3, 2**56 - 1]
    assert totals.decode(totals.encode(values)) == values
    with pytest.raises(ValueError):
        totals.encode([-1])


def test_the_totals_are_the_rows_fts5_holds(vault, make_brain):
    """The record bm25() reads, after edits and deletes, counts the rows and words of
    FTS5's own row sizes and nothing else."""
    drift_vault(vault)
    brain = make_brain()
    for i in range(5):
        vault.remove(f"Note {i}.md")
        vault.write(f"Note {10 + i}.md", f"# Note {10 + i}\n\n{'longer words ' * 40}\n")
    brain.sync()
    conn = connect(brain.settings.index_path)
    try:
        for table in totals.TABLES:
            rows = conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]
            assert totals.stored(conn, table) == totals.counted(conn, table)
            assert totals.stored(conn, table)[0] == rows
    finally:
        conn.close()
    assert rows == 95  # notes_fts: a row per note


def test_a_rolled_back_delete_leaves_the_totals(vault, make_brain, index_settings):
    drift_vault(vault)
    brain = make_brain()
    before = brain.snapshot()["text"]
    with pytest.raises(RuntimeError):
        with brain.index.transaction() as w:
            w.delete_note(w.load_stat("Note 7.md").rowid)
            raise RuntimeError("a pass that fails half-way")
    assert brain.snapshot()["text"] == before
    vault.remove("Note 3.md")
    brain.sync()
    assert_same_scores(text_scores(brain), text_scores(make_brain(index=index_settings("fresh"))))


def test_an_index_with_totals_from_before_is_recounted_when_opened(
    vault, make_brain, index_settings
):
    """Notes deleted the way earlier versions did (FTS5's contentless delete alone,
    the totals left counting them): the next open recounts, and the scores are a fresh
    index's without a rebuild."""
    drift_vault(vault)
    brain = make_brain()
    path = brain.settings.index_path
    brain.close()
    conn = connect(path)
    try:
        for rel in ("Note 7.md", "Note 12.md", "Note 30.md"):
            (rowid,) = conn.execute("SELECT rowid FROM notes WHERE path = ?", (rel,)).fetchone()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "DELETE FROM chunks_fts WHERE rowid IN "
                "(SELECT rowid FROM chunks WHERE note_rowid = ?)",
                (rowid,),
            )
            conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
            conn.execute("DELETE FROM notes WHERE rowid = ?", (rowid,))
            conn.execute("COMMIT")
            vault.remove(rel)
        conn.execute("DELETE FROM meta WHERE key = ?", (totals.RECOUNTED,))
        stale = totals.stored(conn, "notes_fts")
        assert stale[0] == conn.execute("SELECT count(*) FROM notes").fetchone()[0] + 3
    finally:
        conn.close()
    reopened = make_brain(sync=False)
    fresh = make_brain(index=index_settings("fresh"))
    assert reopened.snapshot() == fresh.snapshot()
    assert_same_scores(text_scores(reopened), text_scores(fresh))
