"""One frontmatter reader for reading and editing: whatever the reader sees, the updater
edits, with the file's own line endings; odd dates and key spellings are never fatal."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault.note import parse_note
from vault_brain.vault.render import render_update

NOW = datetime(2026, 11, 30, 14, 12, 31, tzinfo=UTC)

# --- line endings (item 4) --------------------------------------------------------------

OLD_MAC = b"---\rtitle: Old Mac note\rowner: sam\rtags: [a, b]\r---\r# Heading\rBody line.\r"


def test_the_reader_sees_cr_only_frontmatter() -> None:
    note = parse_note("Old.md", OLD_MAC)
    assert note.title == "Old Mac note"
    assert note.tags == ("a", "b")
    assert note.body == "# Heading\nBody line.\n"


def test_a_content_update_of_a_cr_only_note_keeps_its_keys_and_its_line_endings() -> None:
    new = render_update(OLD_MAC, content="New body.\nSecond line.", now=NOW)
    assert b"\n" not in new
    assert new.startswith(b"---\rtitle: Old Mac note\rupdated: 2026-11-30T14:12:31Z\r")
    assert new.endswith(b"\rowner: sam\rtags: [a, b]\r---\rNew body.\rSecond line.\r")
    note = parse_note("Old.md", new)
    assert (note.title, note.tags, note.updated) == (
        "Old Mac note",
        ("a", "b"),
        "2026-11-30T14:12:31Z",
    )
    assert note.body == "New body.\nSecond line.\n"


def test_a_summary_update_of_a_cr_only_note_keeps_its_body_byte_for_byte() -> None:
    new = render_update(OLD_MAC, summary="Short.", now=NOW)
    assert new.endswith(b"\r---\r# Heading\rBody line.\r")
    assert new.count(b"---\r") == 2  # no second block pushed into the body
    assert parse_note("Old.md", new).summary == "Short."


_ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def notes_with_frontmatter(draw: st.DrawFn) -> tuple[bytes, str]:
    nl = draw(_ENDINGS)
    fence_pad = draw(st.sampled_from(["", " ", "\t "]))
    keys = [
        "title: A title",
        "owner: sam",
        "tags: [alpha, beta]",
        "aliases:\n  - other name",
        "# a comment",
        "due: 2024-02-30",
    ]
    chosen = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=6, unique=True))
    block = nl.join(key.replace("\n", nl) for key in chosen)
    body_lines = draw(st.lists(st.sampled_from(["# Heading", "text", "", "---", "- item"])))
    bom = draw(st.sampled_from(["", "\ufeff"]))
    text = f"{bom}---{fence_pad}{nl}{block}{nl}---{fence_pad}{nl}" + nl.join(body_lines)
    return text.encode("utf-8"), nl


@settings(max_examples=300, deadline=None)
@given(notes_with_frontmatter())
def test_whatever_frontmatter_the_reader_sees_the_updater_edits(case: tuple[bytes, str]) -> None:
    raw, nl = case
    before = parse_note("N.md", raw)
    new = render_update(raw, summary="Fresh summary.", now=NOW)
    after = parse_note("N.md", new)
    assert after.frontmatter_ok
    assert after.summary == "Fresh summary."
    assert (after.title, after.tags, after.aliases, after.body) == (
        before.title,
        before.tags,
        before.aliases,
        before.body,
    )
    assert set(re.findall(r"\r\n|\r|\n", new.decode("utf-8"))) == {nl}


# --- dates that do not exist (item 17) --------------------------------------------------


def test_an_impossible_updated_date_is_replaced_not_fatal() -> None:
    raw = b"---\ntitle: T\nupdated: 2024-02-30\ndue: 2024-13-45\n---\nBody.\n"
    new = render_update(raw, summary="S.", now=NOW)
    assert b"updated: 2026-11-30T14:12:31Z\n" in new
    assert b"due: 2024-13-45\n" in new
    assert parse_note("T.md", new).summary == "S."


def test_an_impossible_date_in_a_key_we_do_not_own_survives_a_content_update() -> None:
    raw = b"---\ncreated: 2023-02-29\ntitle: T\n---\nOld.\n"
    new = render_update(raw, content="New.", now=NOW)
    assert new.startswith(b"---\ncreated: 2023-02-29\ntitle: T\n")
    assert new.endswith(b"---\nNew.\n")


# --- our keys, however they are spelled (item 23) ----------------------------------------


def test_clearing_tags_removes_capitalised_and_singular_keys() -> None:
    raw = b"---\nTags: [a, b]\ntag: c\nowner: sam\n---\nBody.\n"
    new = render_update(raw, tags=[], now=NOW)
    assert b"Tags" not in new and b"tag:" not in new
    assert parse_note("N.md", new).tags == ()
    assert b"owner: sam\n" in new


def test_setting_tags_replaces_every_spelling_with_one_key() -> None:
    raw = b"---\nTAGS: [a]\ntag: b\n---\nBody.\n"
    new = render_update(raw, tags=["x", "y"], now=NOW)
    assert parse_note("N.md", new).tags == ("x", "y")
    assert b"TAGS: [x, y]\n" in new and b"tag:" not in new  # one key, the first spelling


def test_clearing_a_capitalised_summary_removes_it() -> None:
    raw = b"---\nSummary: An old summary.\nowner: sam\n---\nBody.\n"
    new = render_update(raw, summary="", now=NOW)
    assert b"ummary" not in new
    assert parse_note("N.md", new).summary == ""


def test_a_new_summary_replaces_a_capitalised_one_in_its_place() -> None:
    raw = b"---\nowner: sam\nSummary: Old.\npriority: 2\n---\nBody.\n"
    new = render_update(raw, summary="New.", now=NOW)
    assert new.startswith(b"---\nowner: sam\nSummary: New.\n")
    assert new.count(b"ummary") == 1 and b"priority: 2\n" in new
    assert parse_note("N.md", new).summary == "New."


def test_a_capitalised_title_is_replaced_and_a_capitalised_id_is_not_doubled() -> None:
    raw = b"---\nID: abc123\nTitle: Old\n---\nBody.\n"
    new = render_update(raw, title="New", id="zzz99999", now=NOW)
    assert b"zzz99999" not in new
    note = parse_note("N.md", new)
    assert (note.id, note.title) == ("abc123", "New")


# --- through the service: what memory_update does with such notes ------------------------


def test_updates_of_odd_notes_succeed_and_keep_their_keys(vault, brain) -> None:
    vault.write("Dates.md", "---\ntitle: Dates\nupdated: 2024-02-30\nowner: sam\n---\nBody.\n")
    vault.write("Mac.md", OLD_MAC)
    vault.write("Tags.md", "---\nTags: [a, b]\nSummary: Old.\n---\nBody.\n")
    brain.sync()
    for rel in ("Dates.md", "Mac.md", "Tags.md"):
        version = brain.get(rel).version
        brain.update(rel, version, summary="", tags=[])
    assert b"owner: sam\n" in (vault.root / "Dates.md").read_bytes()
    mac = (vault.root / "Mac.md").read_bytes()
    assert b"\n" not in mac and b"owner: sam\r" in mac
    tags = (vault.root / "Tags.md").read_bytes()
    assert b"Tags" not in tags and b"Summary" not in tags
    assert brain.get("Tags.md").tags == []
