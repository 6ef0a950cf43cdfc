"""One frontmatter reader for reading and editing: whatever the reader sees, the updater
edits, with the file's own line endings; odd dates and key spellings are never fatal."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault.frontmatter import LOAD_ERRORS, TooManyValues, load_block
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


# --- aliases that multiply (issue 25, item 10) ------------------------------------------
# Nothing a note holds may make one call run unbounded. YAML's aliases repeat the node an
# anchor names; nested, they multiply: ten per level, ten levels, 10**10 values from 1 KB.
# A merge-key chain (each mapping merges the one before) grows with the square of its
# length. Both are refused as frontmatter by their expanded size, which is counted on the
# composed node graph (each node once), never by expanding them.


def alias_bomb() -> str:
    lines = ["l0: &l0 [" + ", ".join(["x"] * 10) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(["title: Bomb", *lines, "tags: *l9"]) + "\n"


def merge_chain(links: int = 3000) -> str:
    lines = ["a0: &a0 {k0: v}"]
    lines += [f"a{i}: &a{i} {{<<: *a{i - 1}, k{i}: v}}" for i in range(1, links)]
    return "\n".join(["title: Chain", *lines]) + "\n"


def note_with(block: str) -> bytes:
    return ("---\n" + block + "---\n# Heading\n\nThe body is still indexed.\n").encode()


def test_an_alias_bomb_is_refused_as_frontmatter_by_its_expanded_size() -> None:
    with pytest.raises(TooManyValues) as caught:
        load_block(alias_bomb())
    assert "10000000000" in str(caught.value) or "more than" in str(caught.value)


def test_a_merge_key_chain_is_refused_as_frontmatter_by_its_expanded_size() -> None:
    with pytest.raises(TooManyValues):
        load_block(merge_chain())


def test_a_recursive_alias_is_refused_as_frontmatter() -> None:
    with pytest.raises(LOAD_ERRORS):
        load_block("loop: &a [x, *a]\n")


def test_aliases_used_in_moderation_still_load() -> None:
    block = (
        "base: &b {owner: sam, team: core}\nthis: {<<: *b, owner: kim}\nkw: &k [a, b]\nalso: *k\n"
    )
    data = load_block(block)
    assert data["this"] == {"owner": "kim", "team": "core"} and data["also"] == ["a", "b"]


def test_a_large_frontmatter_without_aliases_still_loads() -> None:
    block = "keywords:\n" + "".join(f"  - word{n}\n" for n in range(30_000))
    assert len(load_block(block)["keywords"]) == 30_000


def test_a_note_with_an_alias_bomb_is_indexed_from_its_text_with_a_warning() -> None:
    note = parse_note("Bomb.md", note_with(alias_bomb()))
    assert not note.frontmatter_ok
    assert note.title == "Heading" and note.tags == ()
    assert "The body is still indexed." in note.body
    assert any("alias" in w for w in note.warnings), note.warnings


def test_a_note_with_a_merge_key_chain_is_indexed_from_its_text_with_a_warning() -> None:
    note = parse_note("Chain.md", note_with(merge_chain()))
    assert not note.frontmatter_ok
    assert any("alias" in w for w in note.warnings), note.warnings


# The updates run in a child process: before the budget, the bomb's update never returned,
# so the child's generous timeout is the hang guard, never a measure of speed.
UPDATE_IN_CHILD = """
import sys
from vault_brain.errors import InvalidInput
from vault_brain.vault.render import render_update
raw = sys.stdin.buffer.read()
try:
    render_update(raw, content="new body", tags=["a"], now="2026-11-30T14:12:31Z")
except InvalidInput as exc:
    print("refused:", exc.message)
else:
    print("updated")
"""


@pytest.mark.parametrize("block", [alias_bomb(), merge_chain()], ids=["bomb", "merge-chain"])
def test_an_update_of_a_note_whose_aliases_multiply_is_refused_clearly(block: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", UPDATE_IN_CHILD],
        input=note_with(block),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = done.stdout.decode()
    assert out.startswith("refused:") and "alias" in out, out


# --- the closing fence found by search where no CR can start a line -----------------------


def _split_by_walk(text: str):  # noqa: ANN202 - split_frontmatter with the line walk only
    from vault_brain.vault import frontmatter

    first = frontmatter._FENCE.match(text)
    if first is None:
        return None
    if first.end() == len(text) or text[first.end() - 1] not in "\r\n":
        return frontmatter.Split("", "", "", text, closed=False)
    fence = frontmatter._closing_walk(text, first.end())
    if fence is None:
        return frontmatter.Split("", "", "", text, closed=False)
    return frontmatter.Split(
        text[: first.end()],
        text[first.end() : fence.start()],
        fence.group(),
        text[fence.end() :],
        closed=True,
    )


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["---", "-", "--", "\n", "\r", "\r\n", " ", "\t", "a", "x: 1"]), max_size=30
    )
)
def test_the_closing_fence_is_the_line_walks(pieces: list[str]) -> None:
    from vault_brain.vault.frontmatter import split_frontmatter

    text = "".join(pieces)
    assert split_frontmatter(text) == _split_by_walk(text)
    text = "---\n" + text
    assert split_frontmatter(text) == _split_by_walk(text)
