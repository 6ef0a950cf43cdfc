"""No user's words are ever lost (issue 11, items 2, 5, 6, 7): each test reproduces a way a
save or an update used to lose text or touch the wrong note."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.settle import settle
from vault_brain.errors import InvalidInput


def test_duplicate_save_is_confirmed_against_the_file_on_disk(brain, vault):
    """The index still says a note holds this body, but the person changed it a moment ago
    (the watcher has not caught up): the model's text must land in a file."""
    first = brain.save("Trip plan", "Pack the tent and the stove.")
    vault.write(first.path, vault.read(first.path).replace("the stove", "the kettle"))
    again = brain.save("Trip plan copy", "Pack the tent and the stove.")
    assert again.duplicate_of is None
    files = [p.read_text(encoding="utf-8") for p in vault.root.rglob("*.md")]
    assert any("Pack the tent and the stove." in text for text in files)


def test_true_duplicate_still_returns_the_existing_note(brain, vault):
    first = brain.save("Trip plan", "Pack the tent.")
    again = brain.save("Trip plan 2", "Pack the tent.")
    assert again.duplicate_of == first.id
    assert len(list(vault.root.rglob("*.md"))) == 1


def test_a_path_wins_over_an_id_that_looks_like_a_path(brain, vault):
    vault.write("Budget.md", "# Budget\n\nRent and food.\n")
    vault.write("Other.md", "---\nid: Budget.md\n---\n# Other\n\nSomething else.\n")
    brain.sync()
    view = brain.get("Budget.md")
    assert view.path == "Budget.md"
    trashed = brain.delete("Budget.md", view.version).trashed_to
    assert trashed == ".trash/Budget.md"
    assert (vault.root / "Other.md").exists()


def test_an_id_that_looks_like_a_path_is_not_honoured(brain, vault):
    vault.write("Other.md", "---\nid: Notes/Budget.md\n---\n# Other\n")
    vault.write("Other2.md", "---\nid: budget.md\n---\n# Other 2\n")
    brain.sync()
    assert brain.get("Other.md").id != "Notes/Budget.md"
    assert brain.get("Other2.md").id != "budget.md"


def test_append_past_the_size_cap_is_refused_before_the_file_changes(make_brain, vault):
    brain = make_brain(vault={"max_file_bytes": 2_000})
    saved = brain.save("Log", "first line of the log")
    before = vault.read(saved.path)
    with pytest.raises(InvalidInput) as err:
        brain.update(saved.id, saved.version, append="x" * 3_000)
    assert "size" in err.value.message or "large" in err.value.message
    assert vault.read(saved.path) == before
    assert brain.get(saved.id).path == saved.path
    assert brain.search("first line log", mode="fts").hits[0].id == saved.id


def test_save_too_large_for_the_vault_is_refused(make_brain, vault):
    brain = make_brain(vault={"max_file_bytes": 2_000})
    with pytest.raises(InvalidInput):
        brain.save("Big", "y" * 3_000)
    assert not list(vault.root.rglob("Big*"))


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 2 MB tmpfs for the index folder (needs mount rights; skipped where there are none)."""
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): no full-disk test")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    return filler


def test_save_on_a_full_index_disk_lands_once_and_says_the_index_is_pending(
    make_brain, vault, tiny_disk
):
    brain = make_brain(index={"path": str(tiny_disk / "index.db")})
    brain.save("Warm up", "the index has some pages already")
    filler = _fill(tiny_disk)
    saved = brain.save("Trip plan", "Pack the tent and the stove. " * 200)
    assert (vault.root / saved.path).is_file()
    assert saved.indexed is False
    assert "Pack the tent" in vault.read(saved.path)
    # It succeeded, so the model has no reason to retry into "Trip plan 2.md".
    assert sorted(p.name for p in vault.root.glob("Trip plan*.md")) == ["Trip plan.md"]
    os.unlink(filler)
    brain.sync()
    assert brain.search("tent stove", mode="fts").hits[0].path == saved.path


@pytest.mark.slow
def test_concurrent_saves_with_a_live_watcher_each_reply_names_its_own_file(vault, make_brain):
    """8 threads save unique notes through one Brain while its watcher indexes their file
    events (the MCP server's shape): every reply's id and path are the file's, and the
    index lists each note once. A bounded race, counted."""
    brain = make_brain()
    brain.indexer.start()
    writers, per_writer = 8, 40
    replies: list[tuple[str, str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        for i in range(per_writer):
            word = f"vbrace{n}x{i}"
            try:
                saved = brain.save(f"Race {n} {i}", f"Unique words {word} here.", folder="race")
            except BaseException as exc:  # noqa: BLE001 - counted below
                errors.append(exc)
                continue
            with lock:
                replies.append((saved.id, saved.path, word))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    settle(brain)  # every file event of the saves handled too
    wrong = []
    for note_id, path, word in replies:
        text = (vault.root / path).read_text(encoding="utf-8")
        found = re.search(r"^id:\s*(\S+)\s*$", text, re.MULTILINE)
        if found is None or found.group(1) != note_id or word not in text:
            wrong.append((note_id, path, word))
    listed, cursor = [], None
    while True:
        page = brain.list(folder="race", limit=50, cursor=cursor)
        listed += [n.id for n in page.notes]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert (errors, wrong) == ([], []), f"{len(wrong)} of {len(replies)} replies name another file"
    assert sorted(listed) == sorted(i for i, _, _ in replies)
