"""The full-text arm (search/fulltext.py and the store's rank_text): note-level evidence
next to the best chunk, snippets from the best chunk, and the note-level rows kept in step
with the files."""

from __future__ import annotations

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
