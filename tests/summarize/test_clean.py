"""Cleaning a chat model's reply into a one-line summary."""

from __future__ import annotations

import pytest

from vault_brain.summarize.clean import ELLIPSIS, cap_text, clean_summary, strip_reasoning

CAP = 300


def test_plain_reply_is_kept_as_is():
    assert clean_summary("The release steps we follow.", CAP) == "The release steps we follow."


def test_think_block_is_removed():
    reply = "<think>\nThe user wants a summary. Let me see...\n</think>\n\nThe release steps."
    assert clean_summary(reply, CAP) == "The release steps."


@pytest.mark.parametrize("tag", ["thinking", "reasoning", "THINK", "thought"])
def test_other_reasoning_tags_are_removed(tag):
    reply = f"<{tag}>first I read the note</{tag}>The release steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_several_think_blocks_are_all_removed():
    reply = "<think>a</think>The release <think>b</think>steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_unclosed_think_at_the_start_leaves_nothing():
    assert clean_summary("<think>I should summarise this note but", CAP) == ""


def test_closing_tag_without_opening_keeps_only_the_answer():
    # Chat templates that open <think> themselves: the reply starts inside the block.
    reply = "Okay, the note lists steps.\n</think>\n\nThe release steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_reasoning_preamble_with_summary_label_keeps_the_labelled_part():
    reply = "Reasoning: the note is a checklist.\nIt has steps.\n\nSummary: The release steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_reasoning_preamble_without_label_drops_its_paragraph():
    reply = "Reasoning: the note is a checklist.\n\nThe release steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_summary_label_is_removed():
    assert clean_summary("**Summary:** The release steps.", CAP) == "The release steps."


def test_here_is_a_summary_lead_in_is_removed():
    reply = "Here is a one-sentence summary of the note:\n\nThe release steps."
    assert clean_summary(reply, CAP) == "The release steps."


def test_markdown_fence_is_removed():
    assert clean_summary("```text\nThe release steps.\n```", CAP) == "The release steps."


def test_blockquote_marks_are_removed():
    assert clean_summary("> The release steps.\n> In order.", CAP) == "The release steps. In order."


@pytest.mark.parametrize(
    "wrapped", ['"The release steps."', "“The release steps.”", "*The release steps.*"]
)
def test_quotes_or_emphasis_around_the_whole_are_removed(wrapped):
    assert clean_summary(wrapped, CAP) == "The release steps."


def test_line_breaks_become_single_spaces():
    assert clean_summary("The release\n\nsteps   we follow.", CAP) == "The release steps we follow."


def test_non_english_reply_is_kept():
    assert clean_summary("<think>x</think>Die Schritte vor jedem Release.", CAP) == (
        "Die Schritte vor jedem Release."
    )


def test_long_reply_is_cut_after_the_last_whole_sentence():
    reply = "First sentence is here. Second sentence is here. " + "Third one runs on " * 20
    assert clean_summary(reply, 60) == "First sentence is here. Second sentence is here."


def test_long_sentence_is_cut_at_a_word_with_an_ellipsis():
    out = cap_text("word " * 100, 50)
    assert len(out) <= 50 and out.endswith(ELLIPSIS) and out[: -len(ELLIPSIS)].endswith("word")


def test_text_without_spaces_is_cut_to_the_cap():
    out = cap_text("発表の手順" * 100, 40)
    assert len(out) == 40 and out.endswith(ELLIPSIS)


def test_cjk_sentence_end_is_a_cut_point():
    out = cap_text("これは最初の文で、少し長めです。" + "次の文はとても長い" * 10, 30)
    assert out == "これは最初の文で、少し長めです。"


def test_text_within_the_cap_is_not_touched():
    assert cap_text("Short.", 6) == "Short."


def test_strip_reasoning_keeps_a_reply_without_any():
    assert strip_reasoning("Just the answer.") == "Just the answer."
