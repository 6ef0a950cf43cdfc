"""Invariant 4: keys vault-brain does not own, and the body, survive every write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import frontmatter
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.errors import InvalidInput
from vault_brain.vault.note import parse_note
from vault_brain.vault.render import render_new_note, render_update

NOW = datetime(2026, 11, 30, 14, 12, 31, tzinfo=UTC)
LATER = "2026-12-01T09:00:00Z"


def split(raw: bytes) -> tuple[str, str]:
    """(frontmatter block, body) of rendered bytes, by the fences."""
    text = raw.decode("utf-8")
    assert text.startswith("---\n") or text.startswith("---\r\n")
    nl = "\r\n" if text.startswith("---\r\n") else "\n"
    head, _, body = text[len("---" + nl) :].partition(nl + "---" + nl)
    return head + nl, body


def meta(raw: bytes) -> dict:
    return yaml.safe_load(split(raw)[0]) or {}


def new_note(**overrides: object) -> bytes:
    args: dict = {
        "id": "8k2f9q3m",
        "title": "Release checklist",
        "content": "# Release checklist\n\nSteps.",
        "summary": "The steps we follow.",
        "tags": ["process", "release"],
        "now": NOW,
    }
    args.update(overrides)
    return render_new_note(**args)


# --- render_new_note ---------------------------------------------------------------------------


def test_new_note_has_the_documented_layout() -> None:
    assert new_note() == (
        b"---\n"
        b"id: 8k2f9q3m\n"
        b"title: Release checklist\n"
        b"summary: The steps we follow.\n"
        b"created: 2026-11-30T14:12:31Z\n"
        b"updated: 2026-11-30T14:12:31Z\n"
        b"tags: [process, release]\n"
        b"---\n"
        b"# Release checklist\n\nSteps.\n"
    )


def test_empty_summary_and_tags_are_omitted() -> None:
    assert list(meta(new_note(summary="", tags=[]))) == ["id", "title", "created", "updated"]


def test_new_note_is_read_by_python_frontmatter() -> None:
    post = frontmatter.loads(new_note().decode())
    assert post["title"] == "Release checklist"
    assert post["tags"] == ["process", "release"]
    assert post.content == "# Release checklist\n\nSteps."


def test_timestamps_are_converted_to_utc() -> None:
    local = datetime(2026, 11, 30, 16, 12, 31, tzinfo=timezone(timedelta(hours=2)))
    assert b"created: 2026-11-30T14:12:31Z\n" in new_note(now=local)


def test_numeric_looking_id_stays_a_string() -> None:
    assert meta(new_note(id="12345678"))["id"] == "12345678"


def test_content_with_its_own_frontmatter_gives_one_merged_block_where_ours_win() -> None:
    raw = new_note(
        content="---\ntitle: Evil\nid: stolen\ncreated: 1999-01-01\nsource: web  # kept\n"
        "---\nbody\n"
    )
    assert raw.count(b"---\n") == 2  # one block, not two
    assert meta(raw)["title"] == "Release checklist"
    assert meta(raw)["id"] == "8k2f9q3m"
    assert meta(raw)["created"] != "1999-01-01"
    assert b"source: web  # kept\n" in raw
    assert split(raw)[1] == "body\n"


def test_content_frontmatter_gives_tags_and_summary_when_the_save_does_not() -> None:
    raw = new_note(tags=(), summary=None, content="---\ntags: [a, b]\nsummary: Theirs.\n---\nx\n")
    assert meta(raw)["tags"] == ["a", "b"] and meta(raw)["summary"] == "Theirs."


def test_content_frontmatter_that_is_not_yaml_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not valid YAML"):
        new_note(content="---\nbad: [yaml\n---\nbody\n")


def test_content_gets_exactly_one_trailing_newline() -> None:
    assert new_note(content="text\n\n\n").endswith(b"---\ntext\n")


def test_tags_lose_hashes_and_repeats() -> None:
    assert meta(new_note(tags=["#a", " b ", "a", ""]))["tags"] == ["a", "b"]


@pytest.mark.parametrize(
    "title",
    [
        "Key: value",
        'She said "hi"',
        "It's",
        "# not a comment",
        "- not a list",
        "[not, a, list]",
        "{not: a map}",
        "yes",
        "null",
        "2026-11-30",
        "1e5",
        "会议记录",
        "  padded  ",
        "a\nb",
        "tab\there",
        "@at",
        "*star",
        "&anchor",
        "!tag",
        "%percent",
        "|pipe",
        ">gt",
        "a #b",
    ],
)
def test_tricky_titles_round_trip_exactly(title: str) -> None:
    assert meta(new_note(title=title, summary=title))["title"] == title


@settings(max_examples=200, deadline=None)
@given(
    title=st.text(min_size=1).filter(lambda s: s.strip()),
    summary=st.text(),
    tags=st.lists(st.text(), max_size=5),
)
def test_random_unicode_titles_summaries_and_tags_round_trip(
    title: str, summary: str, tags: list[str]
) -> None:
    data = meta(new_note(title=title, summary=summary, tags=tags))
    assert data["title"] == title
    assert data.get("summary", "") == summary
    expected_tags: list[str] = []
    for tag in tags:
        clean = tag.strip().lstrip("#").strip()
        if clean and clean not in expected_tags:
            expected_tags.append(clean)
    assert data.get("tags", []) == expected_tags


# --- render_update -----------------------------------------------------------------------------

HAND_WRITTEN = (
    "---\n"
    "# kept comment\n"
    "aliases: [ship list]   # inline comment\n"
    "id: 8k2f9q3m\n"
    "title: Old title\n"
    "status: 'draft'\n"
    "related:\n"
    "  - '[[Alpha]]'\n"
    '  - "[[Beta]]"\n'
    "  # a note about Beta\n"
    "tags:\n"
    "  - old\n"
    "  - stale\n"
    "# between comment\n"
    "custom: {a: 1, b: [x, y]}\n"
    "updated: 2020-01-01T00:00:00Z\n"
    "description: >\n"
    "  folded text\n"
    "  over lines\n"
    "---\n"
)
BODY = "# Heading  \n\nText with trailing spaces   \n\n\n- list\n\ttabbed\n"
RAW = (HAND_WRITTEN + BODY).encode()


def unowned_lines(block: str) -> list[str]:
    """The lines of a frontmatter block that belong to keys we do not own (and comments)."""
    out, owned = [], False
    for line in block.splitlines():
        if line.startswith("#"):
            out.append(line)
            continue
        if line and not line[0].isspace() and not line.startswith("#") and ":" in line:
            owned = line.split(":")[0] in ("id", "title", "summary", "updated", "tags")
        if not owned:
            out.append(line)
    return out


def test_update_keeps_unknown_keys_comments_and_order_exactly() -> None:
    raw = render_update(RAW, title="New", summary="Now with a summary", tags=["fresh"], now=LATER)
    assert unowned_lines(split(raw)[0]) == unowned_lines(split(RAW)[0])


def test_update_sets_the_owned_keys() -> None:
    data = meta(render_update(RAW, title="New", summary="S: x", tags=["fresh", "#two"], now=LATER))
    assert (data["title"], data["summary"], data["tags"]) == ("New", "S: x", ["fresh", "two"])


def test_update_replaces_a_multi_line_tags_list_with_one_line() -> None:
    block = split(render_update(RAW, tags=["fresh"], now=LATER))[0]
    assert "tags: [fresh]\n# between comment\n" in block
    assert "- old" not in block and "- stale" not in block


def test_update_moves_updated_and_leaves_created_alone() -> None:
    raw = render_update(new_note(), summary="changed", now=LATER)
    assert b"updated: 2026-12-01T09:00:00Z\n" in raw
    assert b"created: 2026-11-30T14:12:31Z\n" in raw


def test_update_of_only_updated_changes_one_line() -> None:
    raw = render_update(RAW, now=LATER)
    expected = RAW.replace(b"updated: 2020-01-01T00:00:00Z", b"updated: 2026-12-01T09:00:00Z")
    assert raw == expected


def test_summary_is_inserted_after_the_title() -> None:
    block = split(render_update(RAW, summary="new summary", now=LATER))[0]
    assert "title: Old title\nsummary: new summary\nstatus: 'draft'\n" in block


def test_keys_go_to_the_end_of_a_block_without_owned_keys() -> None:
    raw = b"---\naliases: [x]\n# note\n---\nbody\n"
    assert render_update(raw, title="T", now=LATER) == (
        b"---\naliases: [x]\n# note\ntitle: T\nupdated: 2026-12-01T09:00:00Z\n---\nbody\n"
    )


def test_id_is_added_when_the_note_has_none() -> None:
    raw = b"---\naliases: [x]\n---\nbody\n"
    assert meta(render_update(raw, id="abc12345", now=LATER))["id"] == "abc12345"


def test_existing_id_is_never_replaced() -> None:
    assert meta(render_update(RAW, id="other123", now=LATER))["id"] == "8k2f9q3m"


def test_empty_summary_removes_the_key() -> None:
    raw = render_update(new_note(), summary="", now=LATER)
    assert "summary" not in meta(raw)


def test_empty_tags_remove_the_whole_list() -> None:
    block = split(render_update(RAW, tags=[], now=LATER))[0]
    assert "tags" not in yaml.safe_load(block)
    assert "- old" not in block


def test_duplicate_owned_keys_collapse_to_one() -> None:
    raw = b"---\ntitle: a\nx: 1\ntitle: b\n---\n"
    assert render_update(raw, title="c", now=LATER) == (
        b"---\ntitle: c\nupdated: 2026-12-01T09:00:00Z\nx: 1\n---\n"
    )


def test_body_is_kept_byte_for_byte_when_only_metadata_changes() -> None:
    raw = render_update(RAW, title="New", tags=["a"], summary="s", now=LATER)
    assert split(raw)[1] == BODY


def test_content_replaces_the_body() -> None:
    raw = render_update(RAW, content="Brand new body", now=LATER)
    assert split(raw)[1] == "Brand new body\n"
    assert unowned_lines(split(raw)[0]) == unowned_lines(split(RAW)[0])


def test_append_adds_after_exactly_one_blank_line() -> None:
    raw = b"---\ntitle: t\n---\nfirst line\n\n\n\n"
    assert split(render_update(raw, append="\n\nmore", now=LATER))[1] == "first line\n\nmore\n"


def test_append_to_a_body_without_final_newline() -> None:
    raw = b"---\ntitle: t\n---\nfirst line"
    assert split(render_update(raw, append="more", now=LATER))[1] == "first line\n\nmore\n"


def test_append_to_an_empty_body() -> None:
    raw = b"---\ntitle: t\n---\n"
    assert split(render_update(raw, append="more", now=LATER))[1] == "more\n"


def test_append_keeps_the_existing_body_text() -> None:
    raw = render_update(RAW, append="tail", now=LATER)
    assert split(raw)[1] == BODY.rstrip("\n") + "\n\ntail\n"


def test_content_and_append_together_are_invalid() -> None:
    with pytest.raises(InvalidInput):
        render_update(RAW, content="a", append="b", now=LATER)


def test_crlf_file_stays_crlf() -> None:
    raw = RAW.replace(b"\n", b"\r\n")
    out = render_update(raw, title="New", summary="S", tags=["t"], append="one\ntwo", now=LATER)
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert out.endswith(b"\r\n\r\none\r\ntwo\r\n")
    assert meta(out)["title"] == "New"


def test_crlf_body_is_kept_byte_for_byte() -> None:
    raw = RAW.replace(b"\n", b"\r\n")
    out = render_update(raw, title="New", now=LATER)
    assert out.split(b"\r\n---\r\n", 1)[1] == BODY.replace("\n", "\r\n").encode()


def test_file_without_frontmatter_gets_a_block_with_only_the_keys_set() -> None:
    raw = b"# Hand written\n\nwords\n"
    assert render_update(raw, title="Hand written", now=LATER) == (
        b"---\ntitle: Hand written\nupdated: 2026-12-01T09:00:00Z\n---\n# Hand written\n\nwords\n"
    )


def test_file_starting_with_a_horizontal_rule_is_not_mistaken_for_frontmatter() -> None:
    raw = b"---\n\nSome text after a rule\n"
    out = render_update(raw, summary="S", now=LATER)
    assert out == b"---\nsummary: S\nupdated: 2026-12-01T09:00:00Z\n---\n" + raw


def test_empty_frontmatter_block_is_filled() -> None:
    assert render_update(b"---\n---\nbody\n", title="T", now=LATER) == (
        b"---\ntitle: T\nupdated: 2026-12-01T09:00:00Z\n---\nbody\n"
    )


def test_byte_order_mark_stays_in_front() -> None:
    out = render_update(b"\xef\xbb\xbf---\ntitle: a\n---\nbody\n", title="b", now=LATER)
    assert out == b"\xef\xbb\xbf---\ntitle: b\nupdated: 2026-12-01T09:00:00Z\n---\nbody\n"


@pytest.mark.parametrize(
    "raw",
    [
        b"---\ntitle: [unclosed\n---\nbody\n",
        b"---\njust a sentence\n---\nbody\n",
        b"---\n- a\n- b\n---\nbody\n",
        b"---\ntitle: a\n  bad: indent\n---\n",
    ],
)
def test_malformed_frontmatter_is_refused(raw: bytes) -> None:
    with pytest.raises(InvalidInput):
        render_update(raw, title="x", now=LATER)


def test_frontmatter_anchor_used_by_an_unknown_key_is_refused_rather_than_broken() -> None:
    raw = b"---\ntitle: &t Shared\naliases: [*t]\n---\n"
    with pytest.raises(InvalidInput):
        render_update(raw, title="New", now=LATER)


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(InvalidInput):
        render_update(b"---\ntitle: \xff\n---\n", title="x", now=LATER)


def test_blank_title_is_refused() -> None:
    with pytest.raises(InvalidInput):
        render_update(RAW, title="  ", now=LATER)


@settings(max_examples=100, deadline=None)
@given(title=st.text(min_size=1).filter(lambda s: s.strip()), summary=st.text(min_size=1))
def test_random_updates_round_trip_and_keep_unknown_keys(title: str, summary: str) -> None:
    raw = render_update(RAW, title=title, summary=summary, now=LATER)
    data = meta(raw)
    assert (data["title"], data["summary"]) == (title, summary)
    assert unowned_lines(split(raw)[0]) == unowned_lines(split(RAW)[0])
    assert split(raw)[1] == BODY


def test_new_note_reads_back_through_the_note_parser() -> None:
    raw = new_note(title='Key: "v" #1', tags=["process", "release"])
    note = parse_note("Release checklist.md", raw)
    assert (note.id, note.title, note.summary) == (
        "8k2f9q3m",
        'Key: "v" #1',
        "The steps we follow.",
    )
    assert (note.created, note.updated) == ("2026-11-30T14:12:31Z", "2026-11-30T14:12:31Z")
    assert note.tags == ("process", "release")
    assert note.frontmatter_ok


def test_updated_note_reads_back_through_the_note_parser() -> None:
    note = parse_note("n.md", render_update(new_note(), append="more", tags=["x"], now=LATER))
    assert (note.id, note.updated, note.tags) == ("8k2f9q3m", LATER, ("x",))
    assert note.body.endswith("Steps.\n\nmore\n")


def test_a_content_change_adds_no_frontmatter_to_a_hand_written_note() -> None:
    raw = b"# Shopping\n\nmilk\n"
    assert (
        render_update(raw, append="eggs", id="abc12345", now=LATER)
        == b"# Shopping\n\nmilk\n\neggs\n"
    )
    assert render_update(raw, content="bread", id="abc12345", now=LATER) == b"bread\n"


def test_a_title_for_a_hand_written_note_adds_frontmatter_with_its_id() -> None:
    out = render_update(b"milk\n", title="Shopping", id="abc12345", now=LATER)
    assert out.startswith(b"---\nid: abc12345\ntitle: Shopping\n")


# --- keys other than ours, set on purpose (the importer's record) ------------------------

IMPORTED = {"claude:5b1c": ["a1b2c3d4e5f6", "000000000123"]}


def test_a_new_note_takes_its_own_created_time_and_extra_keys_after_ours():
    raw = new_note(created="2024-03-01T12:00:00Z", extra={"source": "claude:5b1c"})
    text = raw.decode()
    assert "created: 2024-03-01T12:00:00Z\nupdated: 2026-11-30T14:12:31Z\n" in text
    assert meta(raw)["source"] == "claude:5b1c"
    assert text.index("tags:") < text.index("source:")


def test_extra_keys_replace_their_entry_in_place_and_leave_every_other_key_as_written():
    raw = (
        b"---\nid: n1\n# a comment\nsource: https://example.com  # clipped\n"
        b"imported_chats: {'claude:old': [abc]}\nrating: 5\n---\nBody.\n"
    )
    new = render_update(raw, append="More.", extra={"imported_chats": IMPORTED}, now=LATER)
    text = new.decode()
    assert "# a comment\nsource: https://example.com  # clipped\n" in text
    assert text.index("imported_chats") < text.index("rating: 5")
    assert meta(new)["imported_chats"] == IMPORTED  # a digits-only hash stays text
    assert text.endswith("Body.\n\nMore.\n")


def test_an_extra_key_is_added_at_the_end_and_a_note_without_frontmatter_gets_one():
    with_block = render_update(b"---\nid: n1\n---\nBody.\n", extra={"k": [1]}, now=LATER)
    assert with_block.decode().startswith("---\nid: n1\nupdated: 2026-12-01T09:00:00Z\nk: [1]\n")
    bare = render_update(
        b"Just text.\n", append="More.", id="ab12cd34", extra={"k": "v"}, now=LATER
    )
    assert meta(bare)["id"] == "ab12cd34" and meta(bare)["k"] == "v"
    assert parse_note("n.md", bare).body == "Just text.\n\nMore.\n"


def test_our_own_keys_cannot_be_set_as_extra_keys():
    with pytest.raises(InvalidInput):
        render_update(b"Body.\n", extra={"Title": "x"}, now=LATER)
