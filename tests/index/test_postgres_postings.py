"""Postgres ranks whole notes from impact-ordered postings (index/postgres/fulltext.py):
each query word's best few notes by their stored BM25 part, then those scored exactly. The
same vault indexed in SQLite (FTS5's bm25, exact by construction) is the reference: the
two must agree on the notes and their scores wherever the postings read hold the answer,
through edits, deletes and a vault whose notes grew longer."""

from __future__ import annotations

import pytest

from vault_brain.index.postgres import fulltext
from vault_brain.index.records import Filters
from vault_brain.search.fulltext import text_query

# Filler notes: the common word's idf must be positive (FTS5: under half the notes).
FILLER = {f"Filler {i}.md": f"# Filler {i}\n\nGardening cooking music {i}.\n" for i in range(60)}


@pytest.fixture
def pg_and_sqlite(vault, make_brain, postgres_url, request):
    """(Postgres brain, SQLite brain) over the same vault, synced by the caller's `sync`."""
    schema = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]

    def make():
        pg = make_brain(index={"url": f"{postgres_url}&schema={schema}"})
        lite = make_brain()
        return pg, lite

    return make


def ranked(brain, words: str, limit: int, filters: Filters | None = None) -> list[tuple]:
    """(path, BM25) of the best `limit` notes for the words, best first."""
    with brain.index.read() as r:
        found = r.search_text_notes(text_query(r, words), filters or Filters(), limit)
        paths = r.notes_by_rowids([n for n, _ in found])
    return [(paths[n].path, s) for n, s in found]


def same(a: list[tuple], b: list[tuple]) -> bool:
    return [p for p, _ in a] == [p for p, _ in b] and all(
        s == pytest.approx(t, rel=1e-5) for (_, s), (_, t) in zip(a, b, strict=True)
    )


def words_vault(vault) -> None:
    """Notes where 'common' is in half, 'middle' in a dozen, 'rare' in two, with counts
    and lengths that vary, so BM25's length part decides between them."""
    for rel, text in FILLER.items():
        vault.write(rel, text)
    for i in range(40):
        body = " ".join(["common"] * (1 + i % 5) + ["padding"] * (i * 3 % 37))
        if i % 3 == 0:
            body += " middle" * (1 + i % 2)
        if i in (7, 29):
            body += " rare"
        vault.write(f"Note {i}.md", f"# Note {i}\n\n{body}\n")


QUERIES = ("rare", "middle", "common", "rare middle", "common middle", "common rare middle")


def test_rare_words_rank_as_exact_bm25(vault, pg_and_sqlite):
    words_vault(vault)
    pg, lite = pg_and_sqlite()
    for words in QUERIES:
        assert same(ranked(pg, words, 10), ranked(lite, words, 10)), words


def test_words_held_by_more_notes_than_read_still_rank_their_best_notes_exactly(
    vault, pg_and_sqlite, monkeypatch
):
    """Three postings a word: 'common' (40 notes) and 'middle' (14) are read in part; a
    single word's best notes are its best impacts, so its top three are exact, and every
    score given is the note's exact BM25."""
    words_vault(vault)
    pg, lite = pg_and_sqlite()
    monkeypatch.setattr(fulltext, "POSTINGS_PER_TERM", 3)
    for words in ("common", "middle"):
        assert same(ranked(pg, words, 3), ranked(lite, words, 3)), words
    exact = dict(ranked(lite, "common middle rare", 100))
    for path, score in ranked(pg, "common middle rare", 10):
        assert score == pytest.approx(exact[path], rel=1e-5)
    # Within filters the ranking stays exact however common the words.
    in_folder = Filters(since="1970-01-01T00:00:00Z")
    assert same(ranked(pg, "common middle", 10, in_folder), ranked(lite, "common middle", 10))


def test_edits_and_deletes_keep_the_postings_in_step(
    vault, pg_and_sqlite, make_brain, tmp_path, monkeypatch
):
    """Postgres edited in place ranks as a SQLite index built afresh from the edited
    vault (the reference: what the files say now)."""
    words_vault(vault)
    pg, _ = pg_and_sqlite()
    for i in (3, 7, 12):
        vault.write(f"Note {i}.md", f"# Note {i}\n\nrare rare common middle now {i}\n")
    for i in (0, 29, 33):
        vault.remove(f"Note {i}.md")
    pg.sync()
    lite = make_brain(index={"path": str(tmp_path / "fresh.db")})
    for words in QUERIES:
        assert same(ranked(pg, words, 10), ranked(lite, words, 10)), words
    monkeypatch.setattr(fulltext, "POSTINGS_PER_TERM", 3)
    for words in ("common", "middle", "rare"):
        assert same(ranked(pg, words, 3), ranked(lite, words, 3)), words


def test_impacts_follow_the_notes_mean_length_after_maintain(vault, pg_and_sqlite, monkeypatch):
    """Impacts are stored at the mean note length of their first write. Short notes first
    (mean ~6 words), then long ones: at the old mean a short note with one 'common'
    outweighs a long one with twenty, at the new mean the long ones win. maintain()
    recomputes the impacts, and a word read three notes deep finds the long ones again."""
    for rel, text in FILLER.items():
        vault.write(rel, text)
    for i in range(10):
        vault.write(f"Short {i}.md", f"# Short {i}\n\ncommon word {i}\n")
    pg, lite = pg_and_sqlite()
    for i in range(10):
        body = " ".join(["common"] * 20 + ["padding"] * (180 + i))
        vault.write(f"Long {i}.md", f"# Long {i}\n\n{body}\n")
    pg.sync()
    lite.sync()
    pg.index.maintain()
    monkeypatch.setattr(fulltext, "POSTINGS_PER_TERM", 3)
    expected = ranked(lite, "common", 3)
    assert all(p.startswith("Long") for p, _ in expected)  # the case this test is about
    assert same(ranked(pg, "common", 3), expected)


def held_groups(brain, words: str, filters: Filters | None = None) -> dict[str, set[int]]:
    """Which groups of the query each of its best notes holds, as the calibration asks
    after ranking them (Postgres answers from the ranking), by path."""
    with brain.index.read() as r:
        query = text_query(r, words)
        found = [n for n, _ in r.search_text_notes(query, filters or Filters(), 50)]
        held = r.text_matches(query, found)
        paths = r.notes_by_rowids(found)
    return {paths[n].path: held.get(n, set()) for n in found}


def sqlite_groups(brain, words: str, paths: list[str]) -> dict[str, set[int]]:
    """The same question of SQLite for these notes: FTS5 reads their text."""
    with brain.index.read() as r:
        query = text_query(r, words)
        rowids = {p: r.note_by_path(p).rowid for p in paths}
        held = r.text_matches(query, list(rowids.values()))
    return {p: held.get(n, set()) for p, n in rowids.items()}


def test_the_groups_a_ranked_note_holds_are_its_words_as_sqlite_reads_them(
    vault, pg_and_sqlite, monkeypatch
):
    """Postgres takes them from the postings the notes ranking read (no second look at
    the notes' text): the same groups as SQLite's FTS5 finds in the same notes, for
    words read whole and cut short, a CJK prefix form and a filtered search."""
    words_vault(vault)
    vault.write("中文.md", "# 中文\n\n中国 common 人民\n")
    vault.write("Sub/Deep.md", "# Deep\n\nrare common padding\n")
    pg, lite = pg_and_sqlite()
    monkeypatch.setattr(fulltext, "POSTINGS_PER_TERM", 3)
    for words in (*QUERIES, "rare padding gardening", "中 common", "nothing at all"):
        got = held_groups(pg, words)
        assert got == sqlite_groups(lite, words, list(got)), words
        assert all(got.values()), words  # a ranked note holds some word of the query
    folder = Filters(folder="Sub")
    assert held_groups(pg, "rare common", folder) == {"Sub/Deep.md": {0, 1}}
