"""Remote embeddings and LLM summaries inside the Brain, end to end, against a real HTTP
server on loopback that speaks Ollama and OpenAI (tests/fakes/llm_server.py): batching,
outages and recovery, timeouts, model switches, summaries and their write-back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient

from tests.fakes.llm_server import FakeLLMServer, closed_port_url
from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.indexer import BACKOFF_CAP, BACKOFF_START, Backoff
from vault_brain.server.app import BrainHandle
from vault_brain.server.http import build_app
from vault_brain.service import Brain
from vault_brain.vault.note import parse_note

SHORT_BACKOFF = 0.05  # seconds: long enough to observe, short enough not to slow the suite

NOTES = {
    "Release checklist.md": "# Release checklist\n\nTag the build, run the smoke tests, ship.\n",
    "Garden.md": "# Garden\n\nTomatoes need water every morning in July.\n",
    "Projects/Alpha.md": "# Alpha\n\nThe alpha project migrates billing to the new ledger.\n",
    "Recipes/Bread.md": "# Bread\n\nFlour, water, salt, yeast; knead ten minutes.\n",
    "Travel.md": "# Travel\n\nPassport, chargers and the train tickets to Lyon.\n",
}


@pytest.fixture
def notes(vault):
    for rel, text in NOTES.items():
        vault.write(rel, text)
    return vault


def embed_section(url: str, **changes) -> dict:
    section = {
        "provider": "ollama",
        "base_url": url,
        "model": "fake-a",
        "dimension": 8,
        "batch_size": 2,
        "concurrency": 2,
        "timeout_seconds": 5,
    }
    section.update(changes)
    return section


def summary_section(url: str, **changes) -> dict:
    section = {"provider": "ollama", "base_url": url, "model": "fake-chat", "timeout_seconds": 5}
    section.update(changes)
    return section


@pytest.fixture
def open_brain(make_settings) -> Iterator[Callable[..., Brain]]:
    """Brains with a short back-off, synced once (vectors and summaries left pending)."""
    brains: list[Brain] = []

    def make(*, sync: bool = True, **sections: dict) -> Brain:
        brain = Brain(make_settings(**sections))
        brains.append(brain)
        brain.indexer.embed_backoff.start = brain.indexer.summary_backoff.start = SHORT_BACKOFF
        if sync:
            brain.sync()
        return brain

    yield make
    for b in brains:
        b.close()


def wait_out_backoff(backoff: Backoff) -> None:
    wait_until(lambda: not backoff.waiting(), "the back-off over")


def frontmatter_summary(vault, rel: str) -> str:
    return parse_note(rel, (vault.root / rel).read_bytes()).summary


# --- back-off -------------------------------------------------------------------------


def test_backoff_starts_at_30_seconds_and_doubles_up_to_15_minutes():
    backoff = Backoff()
    delays = [backoff.failed() for _ in range(7)]
    assert (BACKOFF_START, BACKOFF_CAP) == (30, 900)
    assert delays == [30, 60, 120, 240, 480, 900, 900]


def test_backoff_resets_after_a_success():
    backoff = Backoff()
    backoff.failed()
    backoff.failed()
    backoff.succeeded()
    assert (backoff.waiting(), backoff.failed()) == (False, BACKOFF_START)


# --- embeddings -----------------------------------------------------------------------


def test_pending_vectors_are_sent_in_batches_of_the_configured_size(notes, llm_server, open_brain):
    brain = open_brain(embed=embed_section(llm_server.url, batch_size=2))
    chunks = brain.status().chunks
    assert brain.embed_pending() == chunks
    sizes = llm_server.batch_sizes()
    assert max(sizes) <= 2 and sum(sizes) == chunks


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_after_catch_up_hybrid_search_is_not_degraded(notes, llm_server, open_brain, provider):
    brain = open_brain(embed=embed_section(llm_server.url, provider=provider))
    brain.embed_pending()
    result = brain.search("tomatoes water")
    assert not result.degraded and result.hits[0].path == "Garden.md"


@pytest.mark.parametrize("mode", ["error500", "garbage", "missing_field", "wrong_dim", "nan"])
def test_broken_endpoint_leaves_vectors_pending_with_the_error_in_status(
    notes, llm_server, open_brain, mode
):
    llm_server.behaviour.mode = mode
    brain = open_brain(embed=embed_section(llm_server.url))
    assert brain.embed_pending() == 0
    status = brain.status()
    assert status.pending_vectors == status.chunks and status.vectors == 0
    assert "embedding endpoint ollama:fake-a" in status.embed_error
    assert status.last_error == status.embed_error


def test_wrong_dimension_is_named_in_the_error(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "wrong_dim"
    brain = open_brain(embed=embed_section(llm_server.url))
    brain.embed_pending()
    assert "dimension 9, expected 8" in brain.status().embed_error


def test_search_answers_from_full_text_and_says_degraded_while_the_endpoint_fails(
    notes, llm_server, open_brain
):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(embed=embed_section(llm_server.url))
    brain.embed_pending()
    result = brain.search("tomatoes water")
    assert result.degraded and result.reason
    assert result.hits[0].path == "Garden.md"


def test_search_does_not_call_an_endpoint_that_is_backed_off(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(embed=embed_section(llm_server.url))
    brain.indexer.embed_backoff.start = 60.0
    brain.embed_pending()
    before = len(llm_server.seen())
    brain.search("tomatoes water")
    assert len(llm_server.seen()) == before


def test_backed_off_queue_makes_no_request_until_the_delay_passes(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(embed=embed_section(llm_server.url))
    brain.indexer.embed_backoff.start = 60.0
    brain.embed_pending()
    before = len(llm_server.seen())
    assert brain.embed_pending() == 0 and len(llm_server.seen()) == before


def test_after_an_outage_pending_vectors_catch_up_and_the_error_clears(
    notes, llm_server, open_brain
):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(embed=embed_section(llm_server.url))
    brain.embed_pending()
    llm_server.behaviour.mode = "ok"
    wait_out_backoff(brain.indexer.embed_backoff)
    written = brain.embed_pending()
    status = brain.status()
    assert written == status.chunks == status.vectors and status.pending_vectors == 0
    assert status.embed_error is None and status.last_error is None
    assert not brain.search("tomatoes water").degraded


def test_a_slow_endpoint_times_out_without_holding_up_the_queue(notes, llm_server, open_brain):
    llm_server.behaviour.hold = True  # no reply while the queue waits: only timeouts end it
    brain = open_brain(embed=embed_section(llm_server.url, timeout_seconds=0.2))
    assert brain.embed_pending() == 0
    assert "timed out" in brain.status().embed_error


def test_save_succeeds_and_is_findable_while_the_endpoint_is_down(vault, open_brain):
    brain = open_brain(embed=embed_section(closed_port_url()))
    brain.embed_pending()
    saved = brain.save("Kayak trip", "Paddles, dry bags and the tide table for Sunday.")
    result = brain.search("kayak paddles")
    assert result.degraded and result.hits[0].id == saved.id
    assert brain.status().pending_vectors >= 1


def test_a_restart_resumes_pending_vectors_where_it_stopped(notes, llm_server, open_brain):
    settings = embed_section(llm_server.url, batch_size=1, concurrency=1)
    first = open_brain(embed=settings)
    done_first = first.embed_pending(limit=1)  # one batch of 4 chunks, then "crash"
    first.close()
    llm_server.reset()
    second = open_brain(embed=settings, sync=False)
    chunks = second.status().chunks
    assert second.status().pending_vectors == chunks - done_first
    assert second.embed_pending() == chunks - done_first
    assert sum(llm_server.batch_sizes()) == chunks - done_first


def test_model_switch_drops_old_vectors_and_search_stays_on_full_text_until_rebuilt(
    notes, llm_server, open_brain
):
    first = open_brain(embed=embed_section(llm_server.url, model="fake-a"))
    first.embed_pending()
    first.close()
    llm_server.behaviour.dimension = 16
    second = open_brain(embed=embed_section(llm_server.url, model="fake-b", dimension=0))
    status = second.status()
    assert (status.embedding, status.vectors, status.pending_vectors) == (
        "ollama:fake-b",
        0,
        status.chunks,
    )
    result = second.search("tomatoes water")
    assert result.degraded and result.hits[0].path == "Garden.md"


def test_model_switch_re_embeds_every_chunk_with_the_new_model_only(notes, llm_server, open_brain):
    first = open_brain(embed=embed_section(llm_server.url, model="fake-a"))
    first.embed_pending()
    first.close()
    llm_server.reset()
    llm_server.behaviour.dimension = 16
    second = open_brain(embed=embed_section(llm_server.url, model="fake-b", dimension=0))
    chunks = second.status().chunks
    assert second.embed_pending() == chunks
    assert {s.model for s in llm_server.seen()} == {"fake-b"}
    status = second.status()
    assert (status.vectors, status.dimension, status.pending_vectors) == (chunks, 16, 0)
    # The fake model's vectors are random: the calibrated cut-off rightly finds nothing
    # relevant, so ask for every hit to see that the new model's vectors answer.
    result = second.search("tomatoes water", mode="vector", min_score=0.0)
    assert not result.degraded and result.hits


def test_switching_back_to_a_model_reuses_its_cached_vectors(notes, llm_server, open_brain):
    for model in ("fake-a", "fake-b"):
        brain = open_brain(embed=embed_section(llm_server.url, model=model))
        brain.embed_pending()
        brain.close()
    llm_server.reset()
    back = open_brain(embed=embed_section(llm_server.url, model="fake-a"))
    assert back.embed_pending() == back.status().chunks
    assert llm_server.batch_sizes() == []


# --- summaries ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_summary_is_stored_in_the_index_and_served_by_get_and_search(
    vault, llm_server, open_brain, provider
):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.chat_reply = "Watering tomatoes in summer."
    brain = open_brain(summary=summary_section(llm_server.url, provider=provider))
    assert brain.summarize_pending() == 1
    assert brain.get("Garden.md").summary == "Watering tomatoes in summer."
    assert brain.search("tomatoes").hits[0].summary == "Watering tomatoes in summer."


def test_without_write_back_the_file_is_not_touched(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    assert vault.read("Garden.md") == NOTES["Garden.md"]


def test_reasoning_is_stripped_before_the_summary_is_stored(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.chat_reply = "<think>Let me look at the note.</think>\n\nTomato care."
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    assert brain.get("Garden.md").summary == "Tomato care."


def test_note_with_a_frontmatter_summary_is_never_sent(vault, llm_server, open_brain):
    vault.write("Mine.md", "---\nsummary: My own words.\n---\n# Mine\n\nBody text here.\n")
    brain = open_brain(summary=summary_section(llm_server.url))
    assert brain.status().pending_summaries == 0
    assert brain.summarize_pending() == 0 and llm_server.seen() == []
    assert brain.get("Mine.md").summary == "My own words."


def test_without_a_summarizer_the_lead_is_the_summary(vault, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    brain = open_brain()
    assert brain.summarize_pending() == 0
    assert brain.get("Garden.md").summary.startswith("Tomatoes need water")


def test_status_shows_pending_summaries_and_the_summary_model(notes, llm_server, open_brain):
    brain = open_brain(summary=summary_section(llm_server.url))
    status = brain.status()
    assert (status.pending_summaries, status.summary_model) == (len(NOTES), "ollama:fake-chat")


def test_summary_outage_keeps_notes_pending_with_the_error_in_status(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(summary=summary_section(llm_server.url))
    assert brain.summarize_pending() == 0
    status = brain.status()
    assert status.pending_summaries == len(NOTES)
    assert "summary endpoint ollama:fake-chat" in status.summary_error
    assert status.last_error == status.summary_error


def test_a_failing_summary_endpoint_is_asked_once_per_pass(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    # The first batch failed entirely: the pass stops there instead of trying every note.
    assert len(llm_server.seen("/api/chat")) <= 4


def test_after_a_summary_outage_everything_catches_up(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    llm_server.behaviour.mode = "ok"
    wait_out_backoff(brain.indexer.summary_backoff)
    assert brain.summarize_pending() == len(NOTES)
    status = brain.status()
    assert (status.pending_summaries, status.summary_error, status.last_error) == (0, None, None)


def test_saves_succeed_while_the_summary_endpoint_is_down(vault, open_brain):
    brain = open_brain(summary=summary_section(closed_port_url()))
    brain.summarize_pending()
    saved = brain.save("Kayak trip", "Paddles, dry bags and the tide table for Sunday.")
    assert brain.search("kayak").hits[0].id == saved.id
    assert brain.status().pending_summaries == 1


def test_a_restart_resumes_pending_summaries(notes, llm_server, open_brain):
    first = open_brain(summary=summary_section(closed_port_url()))
    first.summarize_pending()
    first.close()
    second = open_brain(summary=summary_section(llm_server.url), sync=False)
    assert second.summarize_pending() == len(NOTES)


def test_turning_summaries_on_queues_notes_indexed_without_them(notes, llm_server, open_brain):
    open_brain().close()  # indexed with no summarizer: nothing queued
    brain = open_brain(summary=summary_section(llm_server.url), sync=False)
    assert brain.summarize_pending() == len(NOTES)


def test_an_edit_queues_the_note_for_a_new_summary(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    vault.write("Garden.md", NOTES["Garden.md"] + "\nAlso basil.\n")
    brain.sync()
    assert brain.status().pending_summaries == 1


def test_write_back_puts_the_summary_into_the_frontmatter(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.chat_reply = "Watering tomatoes in summer."
    brain = open_brain(summary=summary_section(llm_server.url, write_back=True))
    assert brain.summarize_pending() == 1
    assert frontmatter_summary(vault, "Garden.md") == "Watering tomatoes in summer."
    assert brain.status().pending_summaries == 0


def test_write_back_keeps_other_frontmatter_keys_and_the_body(vault, llm_server, open_brain):
    text = "---\nproject: garden  # mine\nrating: 5\n---\n# Garden\n\nTomatoes need water.\n"
    vault.write("Garden.md", text)
    brain = open_brain(summary=summary_section(llm_server.url, write_back=True))
    brain.summarize_pending()
    written = vault.read("Garden.md")
    assert "project: garden  # mine\nrating: 5\n" in written
    assert written.endswith("---\n# Garden\n\nTomatoes need water.\n")


def test_write_back_is_skipped_in_a_read_only_brain(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.chat_reply = "Watering tomatoes."
    brain = open_brain(
        summary=summary_section(llm_server.url, write_back=True), write={"read_only": True}
    )
    brain.summarize_pending()
    assert vault.read("Garden.md") == NOTES["Garden.md"]
    assert brain.get("Garden.md").summary == "Watering tomatoes."


def test_summary_is_never_written_over_a_newer_edit(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.hold = True
    brain = open_brain(summary=summary_section(llm_server.url, write_back=True))
    worker = threading.Thread(target=brain.summarize_pending)
    worker.start()
    try:
        wait_until(lambda: llm_server.seen("/api/chat"), "the summary request")
        edited = NOTES["Garden.md"] + "\nThe person's newer line.\n"
        vault.write("Garden.md", edited)  # while the summary request is in flight
    finally:
        llm_server.release()
        worker.join(HANG_SECONDS)
    assert vault.read("Garden.md") == edited
    assert brain.status().pending_summaries == 1  # the new version waits for its own summary


def test_summary_of_an_old_version_is_not_stored_for_a_newer_one(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.hold = True
    brain = open_brain(summary=summary_section(llm_server.url))
    worker = threading.Thread(target=brain.summarize_pending)
    worker.start()
    try:
        wait_until(lambda: llm_server.seen("/api/chat"), "the summary request")
        vault.write("Garden.md", "# Garden\n\nNow about roses only.\n")
        brain.sync()  # while the summary request is in flight
    finally:
        llm_server.release()
        worker.join(HANG_SECONDS)
    assert brain.get("Garden.md").summary == "Now about roses only."


# --- status across processes and /health ----------------------------------------------


def test_status_in_another_brain_sees_the_recorded_error(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    sections = {
        "embed": embed_section(llm_server.url),
        "summary": summary_section(llm_server.url),
    }
    worker = open_brain(**sections)
    worker.embed_pending()
    worker.summarize_pending()
    reader = open_brain(sync=False, **sections)
    status = reader.status()
    assert "HTTP 500" in status.embed_error and "HTTP 500" in status.summary_error
    assert status.last_error == status.summary_error  # the later of the two


def test_health_shows_pending_counts_last_error_and_models(notes, llm_server, open_brain):
    llm_server.behaviour.mode = "error500"
    brain = open_brain(embed=embed_section(llm_server.url), summary=summary_section(llm_server.url))
    brain.embed_pending()
    handle = BrainHandle(brain.settings, factory=lambda _: brain, attach=lambda _: None)
    handle.start()
    handle.get()
    # A loopback server answers only to its own address (DNS rebinding): not "testserver".
    client = TestClient(build_app(brain.settings, handle), base_url="http://127.0.0.1:8080")
    body = client.get("/health").json()
    assert body["status"] == "degraded"
    assert (body["pending_vectors"], body["pending_summaries"]) == (
        brain.status().chunks,
        len(NOTES),
    )
    assert (body["embedding"], body["summary_model"]) == ("ollama:fake-a", "ollama:fake-chat")
    assert "HTTP 500" in body["last_error"]


# --- the background thread ------------------------------------------------------------


def test_the_watchers_background_thread_catches_summaries_up(notes, llm_server, open_brain):
    brain = open_brain(summary=summary_section(llm_server.url), sync=False)
    stop = brain.start_watching()
    try:
        settled = (len(NOTES), 0)
        wait_until(
            lambda: (brain.status().notes, brain.status().pending_summaries) == settled,
            "every note indexed and summarised",
        )
        assert len(llm_server.seen("/api/chat")) == len(NOTES)
    finally:
        stop()


def test_a_full_reindex_reuses_summaries_without_asking_the_llm_again(
    vault, llm_server, open_brain
):
    vault.write("Garden.md", NOTES["Garden.md"])
    llm_server.behaviour.chat_reply = "Watering tomatoes in summer."
    brain = open_brain(summary=summary_section(llm_server.url))
    assert brain.summarize_pending() == 1
    asked = len(llm_server.seen("/api/chat"))
    brain.sync(full=True)
    assert brain.status().pending_summaries == 0
    assert brain.summarize_pending() == 0
    assert len(llm_server.seen("/api/chat")) == asked
    assert brain.get("Garden.md").summary == "Watering tomatoes in summer."


def test_an_edit_to_the_body_still_asks_for_a_new_summary(vault, llm_server, open_brain):
    vault.write("Garden.md", NOTES["Garden.md"])
    brain = open_brain(summary=summary_section(llm_server.url))
    brain.summarize_pending()
    vault.write("Garden.md", NOTES["Garden.md"] + "\nAlso basil.\n")
    brain.sync()
    assert brain.status().pending_summaries == 1


# ---- a CLI search never waits out a hung endpoint (issue 25, item 14) ----


def cli_search(vault, env: dict) -> subprocess.CompletedProcess:
    """`vault-brain search` in a child; its timeout is a hang guard only (the endpoint
    would hold it for the configured 600 s), never a measure of speed."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", "search", "tomatoes", "--json"]
        + ["--vault", str(vault.root)],
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("pending", [False, True], ids=["query-only", "with-new-chunks"])
def test_a_cli_search_against_a_hung_endpoint_answers_from_full_text(notes, pending):
    with FakeLLMServer() as hung:
        env = {
            "VAULT_BRAIN_EMBED_PROVIDER": "ollama",
            "VAULT_BRAIN_EMBED_BASE_URL": hung.url,
            "VAULT_BRAIN_EMBED_MODEL": "fake",
            "VAULT_BRAIN_EMBED_TIMEOUT_SECONDS": "600",  # a slow local server's setting
        }
        full = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        done = subprocess.run(
            [sys.executable, "-m", "vault_brain", "index", "--vault", str(notes.root)],
            env={**full, **env},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        if pending:
            notes.write("New.md", "# New\n\nTomatoes again, in a new note.\n")
        hung.behaviour.hold = True  # the endpoint stops answering
        result = cli_search(notes, env)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert out["degraded"] is True
        paths = {hit["path"] for hit in out["results"]}
        assert paths == ({"Garden.md", "New.md"} if pending else {"Garden.md"})
