"""One scan of a body's blocks (fenced code, headings), read by links, tags, the title, the
lead and the chunker: they agree on what is code and what is a heading."""

from __future__ import annotations

from vault_brain.index.chunking import chunk_note
from vault_brain.vault.blocks import Heading, fenced_lines, mask_code, scan
from vault_brain.vault.note import parse_note

CALLOUT_WITH_CODE = """Intro words.

> [!example] Shell
> ```sh
# not a heading: a comment in the code of a callout
[[Not a link]] #not-a-tag
> ```

## Real section

Body with [[Real link]] and #real-tag.
"""


def test_headings_are_found_outside_code_only_with_their_offsets():
    body = "# Title\n\n```\n# code\n```\n\n## Two ##\n\n   ### Three\n####### seven is text\n"
    blocks = scan(body)
    assert blocks.headings == (
        Heading(0, 1, "Title"),
        Heading(body.index("## Two"), 2, "Two"),
        Heading(body.index("   ### Three"), 3, "Three"),
    )
    assert blocks.fenced == ((body.index("```"), body.index("\n\n## Two") + 1),)


def test_a_fence_in_a_callout_is_code_for_the_chunker_the_title_links_and_tags_alike():
    note = parse_note("Shell.md", CALLOUT_WITH_CODE.encode())
    assert note.title == "Shell"  # the '# ...' line in the code is no title
    assert [link.target for link in note.links] == ["Real link"]
    assert note.tags == ("real-tag",)
    chunks = chunk_note(note.title, note.body, 12, 2, 0)
    assert {c.heading_path for c in chunks} == {"Shell", "Shell > Real section"}
    # ... and the chunker that scans the body itself agrees with the parse's scan.
    assert chunks == chunk_note(note.title, note.body, 12, 2, 0, note.headings)


def test_an_unclosed_fence_runs_to_the_end_and_hides_every_heading_after_it():
    body = "Text\n\n~~~~\n# one\n~~~\n## two"
    assert scan(body).headings == ()
    assert fenced_lines(body.split("\n")) == [False, False, True, True, True, True]


def test_inline_triple_backticks_are_a_span_not_a_fence():
    body = "Use ```x``` here\n# Heading\n"
    assert scan(body).fenced == ()
    assert [h.text for h in scan(body).headings] == ["Heading"]
    assert mask_code(body) == "Use " + " " * 7 + " here\n# Heading\n"


def test_masking_keeps_length_and_newlines():
    body = "a `b\nc` d\n```\ncode [[x]]\n```\ne\n"
    masked = mask_code(body)
    assert len(masked) == len(body)
    assert [i for i, ch in enumerate(masked) if ch == "\n"] == [
        i for i, ch in enumerate(body) if ch == "\n"
    ]
    assert "[[x]]" not in masked and "b" not in masked and masked.endswith("e\n")


def test_closing_hashes_and_surrounding_spaces_leave_the_heading_text():
    body = "# Title #\n## C# ##\n### ###\n#### tab\t#\t\n##### x#\n"
    assert [h.text for h in scan(body).headings] == ["Title", "C#", "", "tab", "x#"]
