"""The SQLite backend's named queries (index/sqlite/store.py) where their answers must agree
with another way of computing them, and what a killed pass leaves in the file."""

from __future__ import annotations

import pytest

from tests.index.test_fulltext import DENSE, QUESTION, SMALL_CHUNKS, SPREAD, write_all
from tests.index.test_search import NOTES
from tests.index.test_sync import _chain, _fresh_snapshot
from vault_brain.index.records import Filters
from vault_brain.index.sync import LINKS_PENDING
from vault_brain.search.fulltext import text_query


def test_resolving_many_link_keys_at_once_gives_what_one_at_a_time_gives(vault, brain):
    """A first index resolves thousands of link keys in one pass over the notes; a small
    change resolves a few with a query each. Both must follow the same rule."""
    names = [
        "Note.md",
        "A/Note.md",
        "A/B/Note.md",
        "Longer folder/Note.md",
        "B/Note.md",
        "A/B/Other.md",
        "X/A/B/Other.md",
        "100%_done.md",
        "Folder_x/100%_done.md",
        "Café/Menü.md",
        "Deep/er/still/Leaf.md",
        "Leaf.md",
    ]
    for n, rel in enumerate(names):
        aliases = f"aliases: [shared alias, alias {n}]\n" if n % 3 == 0 else ""
        vault.write(rel, f"---\n{aliases}---\n# {rel}\n\nbody {n}\n")
    vault.write("Links.md", "[[Note]] [[A/Note]] [[b/note]] [[Other]] [[a/b/other]]\n")
    brain.sync()
    keys = [
        "note",
        "a/note",
        "b/note",
        "a/b/note",
        "other",
        "a/b/other",
        "x/a/b/other",
        "b/other",
        "100%_done",
        "folder_x/100%_done",
        "x/100%_done",
        "café/menü",
        "menü",
        "leaf",
        "still/leaf",
        "er/still/leaf",
        "deep/er/still/leaf",
        "shared alias",
        "alias 3",
        "alias 4",
        "missing",
        "a/missing",
        "/note",
        "note/",
        "",
    ]
    with brain.index.read() as reads:
        at_once = reads.key_resolver()
        assert [at_once(k) for k in keys] == [reads.resolve_key(k) for k in keys]
        assert reads.resolve_key("b/note") is not None  # the rule is exercised, not all None


def test_links_left_unresolved_by_a_cut_short_pass_are_resolved_by_the_next_sync(
    vault, make_brain, index_settings
):
    _chain(vault, 30)
    brain = make_brain()
    expected = brain.snapshot()
    # What a pass killed between its batches and its end leaves behind.
    with brain.index.transaction() as w:
        w._run("UPDATE links SET target_rowid = NULL")
        w.set_meta(LINKS_PENDING, "1")
    assert brain.snapshot() != expected
    assert brain.sync().changed == 0
    assert brain.snapshot() == expected
    assert brain.snapshot() == _fresh_snapshot(brain, make_brain, index_settings)


def test_chunks_ranked_within_the_best_notes_score_as_when_all_are_ranked(vault, make_brain):
    write_all(vault, {"Trip.md": SPREAD, "Checklist.md": DENSE})
    brain = make_brain(chunk=SMALL_CHUNKS)
    with brain.index.read() as reads:
        query = text_query(reads, QUESTION)
        every = reads.search_text(query, Filters(), 100)
        notes = sorted({h.note_rowid for h in every})
        within = reads.search_text_within(query, notes[:1], 100)
    assert within and {h.note_rowid for h in within} == {notes[0]}
    assert within == [h for h in every if h.note_rowid == notes[0]]


def test_an_edited_or_deleted_note_leaves_no_vector_behind(vault, make_brain):
    for rel, text in NOTES.items():
        vault.write(rel, text)
    brain = make_brain(embed={"provider": "local", "strong": "none"})
    vault.write("How-to/Deploy.md", "# Deploy\n\nShip it on Fridays.\n\n## Rollback\n\nRevert.\n")
    (vault.root / "How-to/Backup.md").unlink()
    brain.sync()
    brain.embed_pending()
    with brain.index.read() as reads:
        stored, chunks = reads.vector_count(), reads.counts().chunks
        _, notes, _ = reads.all_vectors()
    assert stored == chunks  # one vector per live chunk: none of the old ones remain
    assert len(set(notes)) == len(NOTES) - 1
    result = brain.search("nightly base backups pgBackRest WAL archives", mode="vector")
    assert "How-to/Backup.md" not in [h.path for h in result.hits]


@pytest.mark.slow
def test_backlinks_of_a_note_with_a_thousand_linkers_are_one_indexed_lookup(vault, make_brain):
    """One statement however many notes link here, and SQLite's plan for it searches the
    links by their resolved target (an index), never scans a table."""
    vault.write("Hub.md", "# Hub\n\nthe centre\n")
    for n in range(1000):
        vault.write(f"Spoke {n}.md", f"# Spoke {n}\n\nsee [[Hub]]\n")
    brain = make_brain()
    with brain.index.read() as r:
        hub = r.note_by_path("Hub.md")
        statements: list[str] = []  # as run, parameters filled in
        r.conn.set_trace_callback(statements.append)
        try:
            found = r.backlinks(hub.rowid)
        finally:
            r.conn.set_trace_callback(None)
        plan = [
            row[-1] for sql in statements for row in r.conn.execute(f"EXPLAIN QUERY PLAN {sql}")
        ]
    assert len(found) == 1000
    assert len(statements) == 1, statements
    searched = [step for step in plan if step.startswith("SEARCH links USING")]
    assert [s for s in searched if s.endswith("INDEX links_resolved (target_rowid=?)")], plan
    assert not [step for step in plan if step.startswith("SCAN")], plan


def test_chunk_keys_of_a_note_written_in_the_transaction_are_the_ones_a_read_gives(
    vault, make_brain
):
    """upsert_note remembers the rowids it gave the note's chunks (a pass storing parse
    workers' vectors asks right after): in ordinal order, forgotten when the note goes."""
    from vault_brain.index.prepare import prepare_bytes
    from vault_brain.vault.scan import FileStat

    brain = make_brain(sync=False)
    text = "# Long\n" + "".join(f"\n## Part {k}\n\n" + f"numbat {k} words " * 400 for k in range(3))
    raw = text.encode()
    row, chunks, links = prepare_bytes(
        FileStat("Long.md", 1, len(raw)), raw, brain.settings, False
    ).rows
    assert len(chunks) >= 3

    def read_keys(w, rowid: int) -> list[int]:
        found = w._all("SELECT rowid FROM chunks WHERE note_rowid = ? ORDER BY ordinal", (rowid,))
        return [r[0] for r in found]

    with brain.index.transaction() as w:
        rowid = w.upsert_note(row, list(reversed(chunks)), (), links)  # out of order
        assert w.chunk_keys(rowid) == read_keys(w, rowid)
        assert len(read_keys(w, rowid)) == len(chunks)
        again = w.upsert_note(row, chunks[:1], (), links)  # rewritten: one chunk now
        assert again == rowid and w.chunk_keys(rowid) == read_keys(w, rowid)
        assert len(w.chunk_keys(rowid)) == 1
        w.delete_note(rowid)
        assert w.chunk_keys(rowid) == [] == read_keys(w, rowid)


def test_vectors_go_into_the_cache_in_hash_order_and_a_later_one_of_a_hash_wins(vault, make_brain):
    brain = make_brain(sync=False)
    items = [("h3", b"\x03" * 8), ("h1", b"\x01" * 8), ("h3", b"\x09" * 8), ("h2", b"\x02" * 8)]
    with brain.index.transaction() as w:
        w.cache_vectors("m", items)
        stored = w._all("SELECT text_hash, vector FROM embed_cache ORDER BY rowid")
        assert w.cached_vectors("m", ["h1", "h2", "h3"]) == dict(items)
    assert stored == sorted(dict(items).items())


def _midway(progress) -> bool:
    """A pass's progress after a batch that is not its last."""
    return progress.phase == "parse" and 0 < progress.done < progress.total


def _index_names(brain) -> set[str]:
    with brain.index.read() as r:
        return {row[0] for row in r._all("SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_a_first_index_builds_the_put_off_indexes_at_its_end(vault, make_brain):
    """A first index of many batches stores its notes without the secondary indexes of
    schema.PUT_OFF and makes them in its last transaction: the same schema as ever after
    it; while it runs they are absent (what makes it cheaper)."""
    from vault_brain.index.sqlite.schema import INDEXES, PUT_OFF
    from vault_brain.index.sync import BATCH_NOTES

    _chain(vault, 2 * BATCH_NOTES + 50)
    brain = make_brain(sync=False)
    during: list[set[str]] = []
    brain.sync(progress=lambda p: _midway(p) and during.append(_index_names(brain)))
    assert during and not set(PUT_OFF) & during[0]
    assert set(INDEXES) <= _index_names(brain)
    # A second pass over an index with notes puts nothing off.
    for i in range(BATCH_NOTES + 10):
        vault.write(f"more/{i}.md", f"# More {i}\n\n[[{i:04d}]]\n")
    during.clear()
    brain.sync(progress=lambda p: _midway(p) and during.append(_index_names(brain)))
    assert during and all(set(INDEXES) <= names for names in during)


def test_a_first_index_that_fails_midway_or_dies_leaves_no_index_missing(
    vault, make_brain, make_settings
):
    from vault_brain.index.sqlite.schema import INDEXES, PUT_OFF
    from vault_brain.index.sync import BATCH_NOTES
    from vault_brain.service import Brain

    _chain(vault, 2 * BATCH_NOTES + 50)
    brain = make_brain(sync=False)

    def fail(progress) -> None:
        if _midway(progress):
            raise RuntimeError("midway")

    with pytest.raises(RuntimeError, match="midway"):
        brain.sync(progress=fail)
    assert set(INDEXES) <= _index_names(brain)
    # What a pass killed midway leaves: the next open makes them.
    with brain.index.transaction() as w:
        w.put_off_indexes()
    assert not set(PUT_OFF) & _index_names(brain)
    brain.close()
    with Brain(make_settings()) as again:
        assert set(INDEXES) <= _index_names(again)
        assert again.sync().changed > 0
