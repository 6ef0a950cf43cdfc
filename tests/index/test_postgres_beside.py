"""A hybrid search on Postgres runs its two arms at once, the KNN on a second connection
(`Index.beside`): that connection must read the snapshot of the first, so both arms rank
one state of the index even while writers commit."""

from __future__ import annotations

from contextlib import ExitStack

import pytest


@pytest.fixture
def pg_brain(vault, make_brain, postgres_url, request):
    schema = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]

    def make(**sections):
        return make_brain(index={"url": f"{postgres_url}&schema={schema}"}, **sections)

    return make


def test_a_write_committed_before_the_second_reads_first_statement_is_seen_by_neither(
    vault, pg_brain
):
    vault.write("Before.md", "# Before\n\nwritten before the search began\n")
    brain = pg_brain()
    with brain.index.read() as first:
        assert first.note_by_path("Before.md") is not None  # the snapshot is taken here
        with brain.index.beside(first) as side:
            assert side is not None and side.conn is not first.conn
            vault.write("During.md", "# During\n\nwritten while the search ran\n")
            brain.sync()  # committed before either read asks for it
            assert side.note_by_path("Before.md") is not None
            assert side.note_by_path("During.md") is None
            assert side.counts().notes == first.counts().notes == 1
        assert first.note_by_path("During.md") is None
    with brain.index.read() as later:  # a new read sees the commit
        assert later.note_by_path("During.md") is not None


def test_the_second_read_takes_the_snapshot_of_a_first_that_has_asked_nothing(vault, pg_brain):
    """A read sends its BEGIN with its first query: the export starts it, so the second
    read sees the index as it was when it was opened beside, not later."""
    vault.write("Before.md", "# Before\n\nwritten before the search began\n")
    brain = pg_brain()
    with brain.index.read() as first, brain.index.beside(first) as side:
        assert side is not None
        vault.write("During.md", "# During\n\nwritten while the search ran\n")
        brain.sync()
        assert side.note_by_path("During.md") is None
        assert first.note_by_path("During.md") is None


def test_no_second_read_when_every_connection_is_lent_and_the_search_reads_in_turn(vault, pg_brain):
    from vault_brain.index.postgres.db import READERS

    vault.write("Backup.md", "# Backup\n\nnightly postgres backup with pg_dump\n")
    brain = pg_brain(embed={"provider": "local"})
    with ExitStack() as reads:
        first = reads.enter_context(brain.index.read())
        for _ in range(READERS - 1):  # every other connection lent to other searches
            reads.enter_context(brain.index.read())
        with brain.index.beside(first) as side:
            assert side is None  # no waiting for a connection another search holds
    found = brain.search("postgres backup", mode="hybrid")
    assert not found.degraded and found.hits[0].path == "Backup.md"


def test_a_one_shot_process_opens_no_second_connection(postgres_url):
    from vault_brain.index.postgres.db import PostgresIndex

    index = PostgresIndex(postgres_url, "t_one_shot_beside", one_shot=True)
    try:
        with index.read() as first, index.beside(first) as side:
            assert side is None
    finally:
        index.close()
