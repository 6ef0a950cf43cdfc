"""Writes through the Brain: files first, then the index; no user's words are ever lost."""

from __future__ import annotations

import threading

import pytest

from vault_brain.errors import Conflict, Forbidden, InvalidInput, NotFound

HAND_WRITTEN = """---
title: Garden
cssclasses: [wide]   # Obsidian's own key, with a comment
custom: keep me
---
# Garden

Tomatoes need full sun.
"""


def test_saved_note_is_findable_by_full_text_when_save_returns(brain, vault):
    saved = brain.save(
        "Kiln schedule",
        "Fire the kiln on Thursdays at 900 degrees.",
        tags=["pottery"],
        folder="Hobbies",
    )
    assert saved.path == "Hobbies/Kiln schedule.md"
    assert (vault.root / saved.path).is_file()
    hit = brain.search("kiln thursdays", mode="fts").hits[0]
    assert (hit.id, hit.path) == (saved.id, saved.path)


def test_saved_file_has_vault_brain_frontmatter(brain, vault):
    saved = brain.save("Kiln", "body text", summary="When we fire it.", tags=["pottery"])
    view = brain.get(saved.id)
    assert view.summary == "When we fire it."
    assert view.tags == ["pottery"] and view.version == saved.version
    assert view.created and view.updated
    assert vault.read(saved.path).startswith(f"---\nid: {saved.id}\n")


def test_save_never_overwrites_a_file_with_the_same_title(brain, vault):
    vault.write("Kiln.md", "my own kiln note")
    brain.sync()
    saved = brain.save("Kiln", "another one")
    assert saved.path == "Kiln 2.md"
    assert vault.read("Kiln.md") == "my own kiln note"


def test_identical_content_returns_the_existing_note(brain):
    first = brain.save("Kiln", "Fire on Thursdays.")
    again = brain.save("Kiln again", "Fire on Thursdays.")
    assert again.duplicate_of == first.id and again.path == first.path


def test_the_same_content_saved_from_many_threads_at_once_is_one_note(brain, vault):
    """A model client that retries on a timeout sends the same save again while the first
    is still running: the vault gets one note, every other call names it."""
    rounds, threads, doubled = 20, 6, 0
    for r in range(rounds):
        start = threading.Barrier(threads)
        results: list = []

        def save(n: int, r: int, start: threading.Barrier, results: list) -> None:
            start.wait()
            results.append(brain.save(f"Retry {r} from {n}", f"Round {r}: the same words."))

        workers = [
            threading.Thread(target=save, args=(n, r, start, results)) for n in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        made = [x for x in results if x.duplicate_of is None]
        doubled += len(made) - 1
        assert all(x.duplicate_of == made[0].id for x in results if x.duplicate_of), r
    notes = [p for p in vault.root.glob("Retry *.md")]
    assert (doubled, len(notes)) == (0, rounds), f"{doubled} doubled notes in {rounds} rounds"


def test_update_with_the_version_read_replaces_content(brain, vault):
    saved = brain.save("Kiln", "old text")
    updated = brain.update(saved.id, saved.version, content="new text about glazes")
    assert updated.version != saved.version
    assert "new text about glazes" in vault.read(saved.path)
    assert brain.search("glazes", mode="fts").hits[0].id == saved.id


def test_stale_version_is_refused_and_file_untouched(brain, vault):
    saved = brain.save("Kiln", "old text")
    view = brain.get(saved.id)
    vault.write(saved.path, vault.read(saved.path) + "\nAn edit made in Obsidian.\n")
    on_disk = vault.read(saved.path)
    with pytest.raises(Conflict) as err:
        brain.update(saved.id, view.version, content="model's text")
    assert err.value.details["current_version"] != view.version
    assert vault.read(saved.path) == on_disk


def test_append_keeps_unknown_frontmatter_and_body_bytes(brain, vault):
    vault.write("Garden.md", HAND_WRITTEN)
    brain.sync()
    view = brain.get("Garden.md")
    brain.update("Garden.md", view.version, append="Basil likes heat too.")
    text = vault.read("Garden.md")
    assert "cssclasses: [wide]   # Obsidian's own key, with a comment\ncustom: keep me\n" in text
    assert "# Garden\n\nTomatoes need full sun.\n" in text
    assert text.rstrip().endswith("Basil likes heat too.")
    assert "updated:" in text


def test_delete_moves_the_file_to_trash(brain, vault):
    saved = brain.save("Kiln", "text", folder="Hobbies")
    trashed = brain.delete(saved.id, saved.version).trashed_to
    assert trashed.startswith(".trash/Hobbies/")
    assert (vault.root / trashed).read_text().endswith("text\n")
    assert not (vault.root / saved.path).exists()
    with pytest.raises(NotFound):
        brain.get(saved.id)


def test_delete_with_a_stale_version_is_refused(brain, vault):
    saved = brain.save("Kiln", "text")
    vault.write(saved.path, vault.read(saved.path) + "more\n")
    with pytest.raises(Conflict):
        brain.delete(saved.id, saved.version)
    assert (vault.root / saved.path).exists()


@pytest.mark.parametrize("folder", ["../outside", "/etc", ".obsidian", ".trash", ".vault-brain"])
def test_writes_outside_the_vault_or_into_reserved_folders_are_forbidden(brain, vault, folder):
    before = sorted(p.name for p in vault.root.parent.iterdir())
    with pytest.raises(Forbidden):
        brain.save("Escape", "text", folder=folder)
    assert sorted(p.name for p in vault.root.parent.iterdir()) == before
    assert not list(vault.root.rglob("Escape*"))


def test_content_with_a_credential_is_refused(brain, vault):
    with pytest.raises(InvalidInput) as err:
        brain.save("Keys", "aws key AKIAIOSFODNN7EXAMPLF for prod")
    assert "credential" in err.value.message
    assert not list(vault.root.rglob("Keys*"))


def test_read_only_brain_refuses_writes(make_brain):
    brain = make_brain(write={"read_only": True})
    with pytest.raises(Forbidden):
        brain.save("x", "y")


def test_allowed_folders_restrict_where_models_write(make_brain):
    brain = make_brain(write={"allowed_folders": ["Inbox"]})
    assert brain.save("Idea", "text").path == "Inbox/Idea.md"
    with pytest.raises(Forbidden):
        brain.save("Idea", "text", folder="Projects")


def test_list_is_newest_first_and_the_cursor_survives_new_notes(brain):
    ids = [brain.save(f"Note {i}", f"text {i}").id for i in range(5)]
    page = brain.list(limit=2)
    assert len(page.notes) == 2 and page.next_cursor
    brain.save("Brand new", "arrives between pages")
    rest = brain.list(limit=10, cursor=page.next_cursor)
    seen = [n.id for n in page.notes] + [n.id for n in rest.notes]
    assert sorted(seen) == sorted(ids)


def test_bad_cursor_is_invalid_input(brain):
    with pytest.raises(InvalidInput):
        brain.list(cursor="not-a-cursor")


# ---- what a model is told (issue 25, item 8) ----


def test_delete_by_title_answers_with_the_notes_id(brain, vault):
    saved = brain.save("Kiln schedule", "text")
    done = brain.delete("Kiln schedule", saved.version)
    assert done.id == saved.id
    assert done.trashed_to == ".trash/Kiln schedule.md"


def test_a_conflict_after_the_callers_own_update_says_so_and_is_retryable(brain, vault):
    saved = brain.save("Kiln", "first text")
    first = brain.get(saved.id).version
    brain.update(saved.id, first, append="second line")
    with pytest.raises(Conflict) as err:
        brain.update(saved.id, first, append="third line")  # the version before its own write
    assert err.value.details["reason"] == "your_update"
    assert err.value.retryable is True
    assert "someone" not in err.value.message
    assert "second line" in err.value.details["current"]["content"]


def test_a_conflict_on_a_made_up_version_says_it_is_not_a_version_of_the_note(brain, vault):
    saved = brain.save("Kiln", "first text")
    for made_up in ("latest", "1", "a1b2c3d4e5f6"):
        with pytest.raises(Conflict) as err:
            brain.update(saved.id, made_up, append="more")
        assert err.value.details["reason"] == "unknown_version", made_up
        assert err.value.retryable is True
        assert "someone" not in err.value.message
        assert err.value.details["current"]["version"] == saved.version


def test_a_conflict_after_a_persons_edit_says_someone_else_edited_it(brain, vault):
    saved = brain.save("Kiln", "first text")
    view = brain.get(saved.id)
    vault.write(saved.path, vault.read(saved.path) + "\nAn edit made in Obsidian.\n")
    with pytest.raises(Conflict) as err:
        brain.update(saved.id, view.version, content="model's text")
    assert err.value.details["reason"] == "edited"
    assert err.value.retryable is False  # merge first: a blind retry would drop the edit
    assert "An edit made in Obsidian." in err.value.details["current"]["content"]


def test_a_conflict_on_a_version_a_restarted_server_handed_out_is_an_edit(make_brain, vault):
    first = make_brain()
    saved = first.save("Kiln", "first text")
    first.update(saved.id, saved.version, append="second")  # the old version is in history
    first.close()
    again = make_brain()
    with pytest.raises(Conflict) as err:
        again.update(saved.id, saved.version, append="third")
    assert err.value.details["reason"] == "edited"
