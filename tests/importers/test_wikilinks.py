"""Mentions of notes become wikilinks: whole words, any case, longest first, first mention
only, never in code, links or addresses."""

from __future__ import annotations

from vault_brain.importers.markdown import note_title, render_messages
from vault_brain.importers.records import Conversation, Message
from vault_brain.importers.wikilinks import Linker, LinkTarget

LINKER = Linker(
    [
        LinkTarget("Postgres Upgrade", "Postgres Upgrade"),
        LinkTarget("Postgres", "Postgres backup and restore"),
        LinkTarget("Deploy to production", "Deploy to production"),
        LinkTarget("Ship to prod", "Deploy to production"),
        LinkTarget("Tom Becker", "Tom Becker"),
        LinkTarget("Go", "Go"),  # too short to link: "go" is a word
        LinkTarget("2026", "2026"),  # a bare number is never a mention
    ]
)


def link(text: str, done: set[str] | None = None) -> str:
    return LINKER.link(text, set() if done is None else done)


def test_longest_name_wins_and_case_is_kept_in_the_label():
    assert link("the postgres upgrade went fine") == (
        "the [[Postgres Upgrade|postgres upgrade]] went fine"
    )
    assert link("Postgres Upgrade") == "[[Postgres Upgrade]]"


def test_an_alias_links_to_its_note_under_the_words_written():
    assert link("time to ship to prod") == "time to [[Deploy to production|ship to prod]]"


def test_only_whole_words_match():
    assert link("Postgresql and PostgresUpgrade and tom beckers") == (
        "Postgresql and PostgresUpgrade and tom beckers"
    )


def test_only_the_first_mention_of_each_note_is_linked_across_messages():
    done: set[str] = set()
    assert link("Tom Becker and tom becker", done) == "[[Tom Becker]] and tom becker"
    assert link("ask Tom Becker again", done) == "ask Tom Becker again"
    assert done == {"tom becker"}


def test_code_links_and_addresses_are_left_alone():
    text = (
        "`Tom Becker` and\n```\nPostgres Upgrade\n```\n[[Tom Becker]], [Postgres](x.md), "
        "https://example.com/Deploy-to-production <https://Postgres.example>"
    )
    assert link(text) == text


def test_a_mention_never_spans_two_lines_and_spacing_inside_it_is_free():
    assert link("Tom\nBecker") == "Tom\nBecker"
    assert link("ask tom   becker") == "ask [[Tom Becker|tom   becker]]"


def test_short_words_and_numbers_are_not_mentions():
    assert link("Go to 2026 now") == "Go to 2026 now"


def test_a_note_already_linked_is_not_linked_again():
    assert link("Tom Becker", {"tom becker"}) == "Tom Becker"


def test_a_linker_over_many_names_stays_a_lookup():
    """10,000 notes: the text is read once per word, not once per name."""
    many = Linker([LinkTarget(f"Topic number {i}", f"T{i}") for i in range(10_000)])
    assert many.link("see topic number 9999.", set()) == "see [[T9999|topic number 9999]]."


# --- titles and rendering ----------------------------------------------------------------


def conv(title: str, messages: list[Message]) -> Conversation:
    return Conversation("claude", "c1", title, "2026-11-30T09:00:00Z", None, tuple(messages), "x")


def test_a_title_comes_from_the_first_question_when_the_chat_has_no_name():
    q = Message(
        "user",
        "## How do I **roll back** a canary deploy that passed a broken release on a "
        "Friday evening?",
        None,
    )
    assert (
        note_title(conv("New chat", [q]))
        == "How do I roll back a canary deploy that passed a broken release on a Friday…"
    )
    assert note_title(conv("", [Message("user", "Short one", None)])) == "Short one"
    assert note_title(conv("Named", [q])) == "Named"
    assert note_title(conv("", [])) == "Claude conversation 2026-11-30"


def test_messages_render_with_a_label_per_speaker_and_open_fences_closed():
    text = render_messages(
        [
            Message("user", "Show code", "2026-11-30T09:00:00Z"),
            Message("assistant", "```python\nprint(1)", None),
            Message("user", "thanks", None),
        ],
        "chatgpt",
    )
    assert text == (
        "**User** · 2026-11-30 09:00\n\nShow code\n\n"
        "**ChatGPT**\n\n```python\nprint(1)\n```\n\n"
        "**User**\n\nthanks\n"
    )
