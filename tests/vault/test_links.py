"""Wikilinks, embeds and inline #tags: found in prose, never in code."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from vault_brain.vault.links import Link, extract_links, extract_tags, mask_code
from vault_brain.vault.note import parse_note


def shared_dir() -> Path:
    env = os.environ.get("VAULT_BRAIN_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".." / "shared"


def corpus(name: str) -> Path:
    path = shared_dir() / "corpora" / name
    if not path.is_file():
        pytest.skip(f"shared corpus {name} not found (set VAULT_BRAIN_SHARED or ../shared)")
    return path


def read_members(archive: Path, wanted: set[str]) -> dict[str, bytes]:
    """Read only the named members of a tarball, in memory."""
    found: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name in wanted:
                handle = tar.extractfile(member)
                assert handle is not None
                found[member.name] = handle.read()
    return found


def link(target: str, heading=None, alias=None, embed=False) -> Link:
    return Link(target=target, heading=heading, alias=alias, embed=embed)


# --- links in prose ---------------------------------------------------------------------


def test_plain_wikilink_is_found():
    assert extract_links("See [[Project Alpha]] today.") == (link("Project Alpha"),)


def test_alias_is_split_from_target():
    assert extract_links("[[Alpha|the alpha]]") == (link("Alpha", alias="the alpha"),)


def test_heading_is_split_from_target():
    assert extract_links("[[Alpha#Risks]]") == (link("Alpha", heading="Risks"),)


def test_heading_and_alias_together():
    assert extract_links("[[Folder/Alpha#Risks|risks]]") == (
        link("Folder/Alpha", heading="Risks", alias="risks"),
    )


def test_same_note_heading_link_is_skipped():
    assert extract_links("Jump to [[#Risks]] or [[#^block1|there]].") == ()


def test_embed_is_marked():
    assert extract_links("![[diagram.png]]") == (link("diagram.png", embed=True),)


def test_trailing_md_is_stripped_from_target():
    assert extract_links("[[Notes/Alpha.md]] and [[Beta.MD#H]]") == (
        link("Notes/Alpha"),
        link("Beta", heading="H"),
    )


def test_table_escaped_pipe_gives_alias():
    assert extract_links("| [[Alpha\\|the alpha]] | x |") == (link("Alpha", alias="the alpha"),)


def test_escaped_brackets_are_not_a_link():
    assert extract_links(r"Literal \[[not a link]] here") == ()


def test_duplicates_are_kept_once_in_order_of_first_appearance():
    text = "[[B]] [[A]] [[B]] [[A|x]] ![[A]] [[A]]"
    assert extract_links(text) == (
        link("B"),
        link("A"),
        link("A", alias="x"),
        link("A", embed=True),
    )


def test_brackets_that_are_not_wikilinks_are_ignored():
    text = "[[Top](#top)] and [[x 24] True] and F[[ParamArray] int]"
    assert extract_links(text) == ()


# --- never inside code ------------------------------------------------------------------


@pytest.mark.parametrize(
    "fence_open,fence_close",
    [
        ("```", "```"),
        ("~~~", "~~~"),
        ("````cpp", "````"),
        ("   ```", "   ```"),
        ("> ```", "> ```"),
        ("    ```", "    ```"),  # fence nested in a list item
    ],
)
def test_links_inside_fenced_code_are_ignored(fence_open, fence_close):
    code = f"{fence_open}\n[[nodiscard]] int f();\n{fence_close}"
    text = f"Intro [[Real]]\n\n{code}\n\nAfter [[Also]]\n"
    assert extract_links(text) == (link("Real"), link("Also"))


def test_shorter_fence_does_not_close_a_longer_one():
    text = "````\n```\n[[inside]]\n```\n````\n[[outside]]\n"
    assert extract_links(text) == (link("outside"),)


def test_tilde_does_not_close_a_backtick_fence():
    text = "```\n~~~\n[[inside]]\n```\n[[outside]]\n"
    assert extract_links(text) == (link("outside"),)


def test_unclosed_fence_hides_links_to_the_end():
    assert extract_links("[[before]]\n```\n[[inside]]\nmore [[inside too]]\n") == (link("before"),)


@pytest.mark.parametrize(
    "text",
    [
        "use `[[nodiscard]]` here",
        "use ``[[nodiscard]] with ` inside`` here",
        "use ```[[nodiscard]]``` here",
        "a span `over\n[[two lines]]` here",
    ],
)
def test_links_inside_inline_code_are_ignored(text):
    assert extract_links(text + " [[Real]]") == (link("Real"),)


def test_unmatched_backtick_does_not_hide_links():
    assert extract_links("a ` stray backtick [[Real]]") == (link("Real"),)


def test_code_span_does_not_cross_a_blank_line():
    assert extract_links("a ` open\n\n[[Real]] then ` close") == (link("Real"),)


def test_escaped_backtick_does_not_open_a_code_span():
    assert extract_links(r"\`[[Real]]`") == (link("Real"),)


def test_mask_keeps_length_and_newlines():
    text = "a `code`\n```\nx\n```\nb"
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert masked.count("\n") == text.count("\n")
    assert "code" not in masked and masked.endswith("b")


def test_many_unmatched_backticks_are_handled():
    text = ("`` a ` b " * 20_000) + "[[Real]]"
    assert extract_links(text) == (link("Real"),)


# --- tags -------------------------------------------------------------------------------


def test_inline_tags_are_lowercased_unique_and_sorted():
    assert extract_tags("#Zeta and #alpha then #ALPHA") == ("alpha", "zeta")


def test_nested_tag_keeps_its_slashes():
    assert extract_tags("filed under #project/alpha-2_b") == ("project/alpha-2_b",)


def test_tag_needs_a_non_digit():
    assert extract_tags("issue #123 and #2024 but #1st") == ("1st",)


def test_heading_is_not_a_tag():
    assert extract_tags("# Heading\n## Sub heading\ntext") == ()


def test_hash_inside_a_word_or_url_is_not_a_tag():
    text = "see https://example.com/page#section and C# and a#b and [x](#anchor)"
    assert extract_tags(text) == ()


def test_wikilink_heading_is_not_a_tag():
    assert extract_tags("[[Note#Heading]] and [[#Local]]") == ()


def test_tags_in_code_are_ignored():
    assert extract_tags("`#inline`\n```\n#fenced\n```\n#real") == ("real",)


def test_tag_ends_at_punctuation():
    assert extract_tags("(done: #todo, #later.) #a!b") == ("a", "later", "todo")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("笔记 #标签 和 #学习/数学", ("学习/数学", "标签")),
        ("#日本語タグ。次の文", ("日本語タグ",)),
        ("заметка #Заметки и #идеи", ("заметки", "идеи")),
        ("#ภาษาไทย คำ", ("ภาษาไทย",)),
    ],
)
def test_tags_in_cjk_russian_and_thai(text, expected):
    assert extract_tags(text) == expected


# --- real corpora -----------------------------------------------------------------------

# Files whose every [[ sits in a code fence or an inline code span.
CPP_ALL_IN_CODE = {
    "cpp-docs/docs/code-quality/c26816.md",
    "cpp-docs/docs/code-quality/using-the-cpp-core-guidelines-checkers.md",
    "cpp-docs/docs/error-messages/compiler-warnings/c5240.md",
    "cpp-docs/docs/error-messages/compiler-warnings/c4834.md",
    "cpp-docs/docs/overview/cpp-conformance-improvements-2017.md",
    "cpp-docs/docs/overview/visual-cpp-language-conformance.md",
}


def wikilinks(links: tuple[Link, ...], text: str) -> tuple[Link, ...]:
    """The links written as [[...]] (cpp-docs also has ordinary Markdown links)."""
    return tuple(lk for lk in links if f"[[{lk.target}" in text)


def test_cpp_attributes_in_code_are_not_links():
    files = read_members(corpus("cpp-docs.tar.gz"), CPP_ALL_IN_CODE)
    assert set(files) == CPP_ALL_IN_CODE
    for name, raw in files.items():
        assert b"[[" in raw
        note = parse_note(name.removeprefix("cpp-docs/"), raw)
        assert wikilinks(note.links, raw.decode("utf-8")) == (), name


def test_cpp_docs_has_links_only_where_brackets_sit_outside_code():
    """Of 248 [[...]] hits in cpp-docs, only two sit in prose (Obsidian links them too)."""
    found: dict[str, tuple[Link, ...]] = {}
    with tarfile.open(corpus("cpp-docs.tar.gz"), "r:gz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".md"):
                continue
            handle = tar.extractfile(member)
            assert handle is not None
            raw = handle.read()
            if b"[[" in raw:
                text = raw.decode("utf-8")
                links = wikilinks(extract_links(text), text)
                if links:
                    found[member.name] = links
    assert found == {
        "cpp-docs/docs/build/reference/arch-arm64.md": (link("+feature"),),  # [[+feature]](x)
        "cpp-docs/docs/code-quality/c6030.md": (link("noreturn"),),  # in a blockquote
    }


def test_obsidian_help_wikilinks_are_found():
    name = "obsidian-help/en/Linking notes and files/Internal links.md"
    raw = read_members(corpus("obsidian-help.tar.gz"), {name})[name]
    note = parse_note("Linking notes and files/Internal links.md", raw)
    assert link("Settings", heading="Files and links", alias="Files and links") in note.links
    assert link("Quick switcher", heading="^search-autocomplete-large", embed=True) in note.links
    assert link("Aliases", alias="alias") in note.links
    nested = "Questions and advice#Report bugs and request features"
    assert link("Help and support", heading=nested) in note.links
    # Written as examples in inline code only:
    assert all(lk.target != "Three laws of motion" for lk in note.links)


def test_obsidian_help_en_vault_is_densely_linked():
    with tarfile.open(corpus("obsidian-help.tar.gz"), "r:gz") as tar:
        notes = links = embeds = 0
        for member in tar:
            if member.isfile() and member.name.startswith("obsidian-help/en/"):
                handle = tar.extractfile(member)
                assert handle is not None
                note = parse_note(member.name, handle.read())
                notes += 1
                links += sum(not lk.embed for lk in note.links)
                embeds += sum(lk.embed for lk in note.links)
    assert notes == 173
    assert 900 < links <= 1582  # distinct per note, outside code
    assert 150 < embeds <= 307


# --- Markdown links (Obsidian with "Use [[Wikilinks]]" turned off) ---------------------------


def test_markdown_link_to_a_note_is_a_link_with_its_text_as_alias():
    assert extract_links("See [the plan](Projects/Alpha%20plan.md#Risks).") == (
        link("Projects/Alpha plan", heading="Risks", alias="the plan"),
    )


def test_relative_markdown_link_resolves_against_the_notes_folder():
    found = extract_links("[up](../Other/B.md) [here](./C.md)", folder="Notes/Sub")
    assert [x.target for x in found] == ["Notes/Other/B", "Notes/Sub/C"]


def test_markdown_links_to_web_pages_attachments_and_headings_are_not_note_links():
    text = "[site](https://example.org) ![img](a.png) [pdf](doc.pdf) [same](#h) [m](mailto:a@b)"
    assert extract_links(text) == ()


def test_markdown_link_in_code_is_not_a_link():
    assert extract_links("`[x](Note.md)`\n\n```\n[y](Other.md)\n```\n") == ()


def test_wrapped_markdown_target_with_spaces_and_a_title():
    assert extract_links('[n](<Folder/My Note.md> "tooltip")') == (
        link("Folder/My Note", alias="n"),
    )


def test_wikilinks_and_markdown_links_keep_their_order_in_the_text():
    found = extract_links("[a](A.md) then [[B]] then ![c](C)")
    assert [(x.target, x.embed) for x in found] == [("A", False), ("B", False), ("C", True)]
