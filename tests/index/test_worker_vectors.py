"""A big pass (parse workers) makes each note's instant vectors beside its parsing and stores
them with the note: the index it builds is the one the vector queue builds, row for row and
byte for byte (issue 23: the cold index on both cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vault_brain.index.sync import PARALLEL_MIN
from vault_brain.service import Brain

NOTES = PARALLEL_MIN + 50  # a pass big enough for parse workers

DUMPS = (
    "SELECT * FROM notes ORDER BY rowid",
    "SELECT * FROM chunks ORDER BY rowid",
    "SELECT * FROM links ORDER BY note_rowid, ordinal",
    "SELECT * FROM tags ORDER BY note_rowid, tag",
    "SELECT model, text_hash, vector FROM embed_cache ORDER BY model, text_hash",
    "SELECT rowid, embedding FROM chunk_vectors ORDER BY rowid",
    "SELECT * FROM temp.terms ORDER BY doc, col, offset",
)


def fill(root: Path) -> None:
    """Notes of one to several chunks, some sharing a chunk's text (embedded once)."""
    for n in range(NOTES):
        folder = root / f"Folder {n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        sections = "".join(
            f"\n## Part {k}\n\n" + f"okapi {n} section {k} words about [[Note {k}]] " * (20 * k)
            for k in range(n % 4)
        )
        (folder / f"Note {n}.md").write_text(
            f"---\ntags: [t{n % 5}]\n---\n# Note {n}\n\nThe same opening line.\n{sections}",
            encoding="utf-8",
        )


def dump(db: Path) -> list[list[tuple]]:
    from vault_brain.index.sqlite.db import _load_vec, pick_binding

    conn = pick_binding().connect(db)  # the binding the index uses: it loads sqlite-vec
    _load_vec(conn)
    conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, chunks_fts, instance)")
    try:
        return [_without_stat_cache(conn.execute(sql)) for sql in DUMPS]
    finally:
        conn.close()


def _without_stat_cache(cursor) -> list[tuple]:
    """The rows, less `mtime_ns`: the stat the next pass compares with, kept as "unsure"
    for a file read within an mtime tick of its saving (index/sync.py), so it depends on
    when each pass ran, not on what was built."""
    names = [d[0] for d in cursor.description]
    keep = [i for i, name in enumerate(names) if name != "mtime_ns"]
    return [tuple(row[i] for i in keep) for row in cursor.fetchall()]


@pytest.mark.slow
def test_a_big_pass_stores_the_instant_vectors_the_queue_would_make(vault, make_settings, tmp_path):
    fill(vault.root)
    a_path, b_path = tmp_path / "a.db", tmp_path / "b.db"
    with Brain(make_settings(embed={"provider": "local"}, index={"path": str(a_path)})) as a:
        report = a.sync()
        assert report.added == NOTES
        st = a.status()
        # Every chunk got its vector in the pass itself: nothing is left to the queue.
        assert st.chunks > NOTES and st.vectors == st.chunks and st.pending_vectors == 0
    # The same vault the way it was built before: full text, then the vector queue.
    with Brain(make_settings(embed={"provider": "none"}, index={"path": str(b_path)})) as b:
        assert b.sync().added == NOTES
    with Brain(make_settings(embed={"provider": "local"}, index={"path": str(b_path)})) as b:
        assert b.status().pending_vectors == st.chunks
        assert b.embed_pending() == st.chunks
    got, want = dump(a_path), dump(b_path)
    for rows_a, rows_b, sql in zip(got, want, DUMPS, strict=True):
        assert rows_a, sql
        assert rows_a == rows_b, sql


@pytest.mark.slow
def test_a_model_that_fails_in_the_workers_loses_no_note_and_leaves_vectors_queued(
    vault, make_settings, tmp_path
):
    fill(vault.root)
    missing = tmp_path / "no-model-here"
    missing.mkdir()
    with Brain(make_settings(embed={"provider": "local", "model": str(missing)})) as brain:
        assert brain.sync().added == NOTES
        st = brain.status()
        assert st.notes == NOTES and st.vectors == 0 and st.pending_vectors == st.chunks
        assert brain.embed_pending() == 0  # the queue tries, fails and says why
        assert "no-model-here" in (brain.status().embed_error or "")
