"""The full-text arm (search/fulltext.py and the store's rank_text): note-level evidence
next to the best chunk, snippets from the best chunk, and the note-level rows kept in step
with the files."""

from __future__ import annotations

import pytest

from tests.conftest import every_backend

backend = every_backend()

SMALL_CHUNKS = {"max_tokens": 24, "overlap": 2, "min_tokens": 4}  # a section, a chunk

# Spread: each section answers half of the question, in a chunk of its own.
SPREAD = (
    "# Trip notes\n\n## Packing\n\n"
    "Bring the passport and the tickets for the whole family and the dog.\n\n"
    "## Arrival\n\n"
    "The harbour office by the harbour wall is next to the ferry, open at eight.\n"
)
# Dense: one chunk with three of the four words.
DENSE = "# Checklist\n\nPassport, tickets and ferry times, checked twice by the whole family.\n"
QUESTION = "passport tickets harbour ferry"
# Unrelated notes, so that the four words are rare (bm25's idf needs a collection).
OTHERS = {f"Other {i}.md": f"# Other {i}\n\nGardening, cooking and music {i}.\n" for i in range(8)}


def write_all(vault, notes):
    for rel, text in {**OTHERS, **notes}.items():
        vault.write(rel, text)


def test_evidence_spread_over_sections_counts_with_note_weight(vault, make_brain):
    write_all(vault, {"Trip.md": SPREAD, "Checklist.md": DENSE})
    brain = make_brain(chunk=SMALL_CHUNKS, text={"note_weight": 0.7})
    assert brain.search(QUESTION, mode="fts").hits[0].path == "Trip.md"


def test_note_weight_zero_ranks_by_the_best_chunk_alone(vault, make_brain):
    write_all(vault, {"Trip.md": SPREAD, "Checklist.md": DENSE})
    brain = make_brain(chunk=SMALL_CHUNKS, text={"note_weight": 0.0})
    assert brain.search(QUESTION, mode="fts").hits[0].path == "Checklist.md"


def test_the_snippet_comes_from_a_chunk_that_matches(vault, make_brain):
    vault.write("Trip.md", SPREAD)
    brain = make_brain(chunk=SMALL_CHUNKS)
    snippet = brain.search("harbour office", mode="fts").hits[0].snippet
    assert "harbour" in snippet.lower()


def test_a_deleted_note_leaves_no_note_level_row_behind(vault, make_brain):
    vault.write("Zebra.md", "# Zebra\n\nStripes of the zebra.\n")
    brain = make_brain()
    assert [h.path for h in brain.search("zebra", mode="fts").hits] == ["Zebra.md"]
    vault.remove("Zebra.md")
    brain.sync()
    vault.write("Lion.md", "# Lion\n\nThe lion sleeps.\n")  # may reuse the freed rowid
    brain.sync()
    assert brain.search("zebra", mode="fts").hits == []
    assert [h.path for h in brain.search("lion", mode="fts").hits] == ["Lion.md"]


def test_an_edited_note_is_found_by_its_new_words_only(vault, make_brain):
    vault.write("Note.md", "# Note\n\nAbout giraffes.\n")
    brain = make_brain()
    vault.write("Note.md", "# Note\n\nAbout elephants now.\n")
    brain.sync()
    assert brain.search("giraffes", mode="fts").hits == []
    assert [h.path for h in brain.search("elephants", mode="fts").hits] == ["Note.md"]


def test_filters_apply_to_note_level_evidence(vault, make_brain):
    vault.write("A/Trip.md", SPREAD)
    vault.write("B/Trip.md", SPREAD)
    brain = make_brain(chunk=SMALL_CHUNKS)
    paths = [h.path for h in brain.search(QUESTION, mode="fts", folder="B").hits]
    assert paths == ["B/Trip.md"]


def test_a_language_new_to_the_vault_is_searched_in_at_once(vault, make_brain):
    """The vault's languages are remembered between searches until the index changes: a
    first German note is searched with German stems by the next query."""
    write_all(vault, {})
    brain = make_brain()
    assert brain.search("Häuser", mode="fts").hits == []  # the languages are remembered now
    vault.write(
        "Stadt.md",
        "# Stadt\n\nDie alten Häuser der Stadt stehen am Fluss, und im Haus wohnt niemand mehr.\n",
    )
    brain.sync()
    assert [h.path for h in brain.search("Hauses", mode="fts").hits] == ["Stadt.md"]


# --- an edited index ranks as a fresh one ----------------------------------------------------

DRIFT_QUESTIONS = ("rare", "common padding", "middle rare", "gardening music")


def drift_vault(vault) -> None:
    """Notes of many lengths, so that the mean length (bm25's avgdl) moves when some go."""
    for i in range(60):
        vault.write(f"Filler {i}.md", f"# Filler {i}\n\nGardening cooking music {i}.\n")
    for i in range(40):
        body = " ".join(["common"] * (1 + i % 5) + ["padding"] * (i * 3 % 37))
        if i in (7, 29):
            body += " rare"
        vault.write(f"Note {i}.md", f"# Note {i}\n\n{body}\n")


def text_scores(brain) -> dict:
    """Every raw full-text score for the questions, keyed by path (rowids differ between
    indexes): whole notes, chunks, and the calibrated search's."""
    from vault_brain.index.records import Filters
    from vault_brain.search.fulltext import text_query

    out: dict = {}
    with brain.index.read() as r:
        for question in DRIFT_QUESTIONS:
            query = text_query(r, question)
            notes = r.search_text_notes(query, Filters(), 200)
            chunks = r.search_text(query, Filters(), 200)
            paths = {n: i.path for n, i in r.notes_by_rowids([n for n, _ in notes]).items()}
            paths.update(
                (n, i.path) for n, i in r.notes_by_rowids([h.note_rowid for h in chunks]).items()
            )
            texts = r.chunk_texts([h.chunk_rowid for h in chunks])
            out[question, "notes"] = {paths[n]: s for n, s in notes}
            out[question, "chunks"] = {
                (paths[h.note_rowid], texts[h.chunk_rowid][1]): h.score for h in chunks
            }
            out[question, "stats"] = r.text_stats(query)
    for question in DRIFT_QUESTIONS:
        out[question, "search"] = {h.path: h.score for h in brain.search(question, mode="fts").hits}
    return out


def assert_same_scores(edited: dict, fresh: dict) -> None:
    assert edited.keys() == fresh.keys()
    for key, want in fresh.items():
        got = edited[key]
        if key[1] == "stats":
            assert got == want, key
            continue
        assert got.keys() == want.keys(), key
        for item, score in want.items():
            assert got[item] == pytest.approx(score, rel=1e-9, abs=1e-12), (key, item)


def test_an_edited_index_scores_as_a_fresh_one(vault, make_brain, index_settings):
    """bm25 weighs a word by the notes' count and mean length: edits and deletes must leave
    them as a rebuild of the same files has them (SQLite's FTS5 kept counting the rows
    and words a contentless-delete table had lost: 5.04 where a fresh index said 4.89)."""
    drift_vault(vault)
    edited = make_brain()
    for round_ in range(3):
        for i in (3 + round_, 7, 12 + round_):
            vault.write(f"Note {i}.md", f"# Note {i}\n\nrare rare common middle now {round_}\n")
        vault.remove(f"Note {30 + round_}.md")
        vault.write(f"New {round_}.md", f"# New {round_}\n\ncommon {'padding ' * 50}\n")
        edited.sync()
    for i in (0, 29):
        vault.remove(f"Note {i}.md")
    edited.sync()
    fresh = make_brain(index=index_settings("fresh"))
    assert_same_scores(text_scores(edited), text_scores(fresh))
