"""Summarizers against a real HTTP server on loopback that speaks Ollama and OpenAI chat."""

from __future__ import annotations

import pytest

from tests.fakes.llm_server import FakeLLMServer, closed_port_url
from vault_brain.config import SummarySettings
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.summarize import make_summarizer
from vault_brain.summarize.llm import MAX_INPUT_CHARS, Summarizer

PROVIDERS = ["ollama", "openai"]
PATHS = {"ollama": "/api/chat", "openai": "/v1/chat/completions"}


def summarizer(server: FakeLLMServer | str, provider: str, **changes) -> Summarizer:
    url = server if isinstance(server, str) else server.url
    values = {"provider": provider, "base_url": url, "model": "fake-chat"}
    values.update(changes)
    made = make_summarizer(SummarySettings(**values))
    assert isinstance(made, Summarizer)
    return made


def test_provider_none_makes_no_summarizer():
    assert make_summarizer(SummarySettings(provider="none")) is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_comes_back_as_the_summary(llm_server, provider):
    llm_server.behaviour.chat_reply = "The steps we follow before a release."
    summary = summarizer(llm_server, provider).summarize("Release", "1. Tag\n2. Ship")
    assert summary == "The steps we follow before a release."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_request_names_the_model_and_uses_the_chat_path(llm_server, provider):
    summarizer(llm_server, provider).summarize("Release", "1. Tag")
    (seen,) = llm_server.seen()
    assert (seen.path, seen.model) == (PATHS[provider], "fake-chat")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_request_is_not_streamed(llm_server, provider):
    summarizer(llm_server, provider).summarize("Release", "1. Tag")
    assert llm_server.seen()[0].body["stream"] is False


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prompt_carries_title_and_body_and_asks_for_the_notes_language(llm_server, provider):
    summarizer(llm_server, provider).summarize("Liste de sortie", "Étapes avant la sortie.")
    system, user = llm_server.seen()[0].messages
    assert "same language as the note" in system["content"]
    assert "Liste de sortie" in user["content"] and "Étapes avant la sortie." in user["content"]


def test_a_long_body_is_cut_before_it_is_sent(llm_server):
    summarizer(llm_server, "ollama").summarize("Long", "x" * (MAX_INPUT_CHARS * 3))
    user = llm_server.seen()[0].messages[1]["content"]
    assert len(user) < MAX_INPUT_CHARS + 100


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reasoning_in_the_reply_is_stripped(llm_server, provider):
    llm_server.behaviour.chat_reply = "<think>The user wants one sentence.</think>\nRelease steps."
    assert summarizer(llm_server, provider).summarize("Release", "1. Tag") == "Release steps."


def test_summary_is_capped_to_max_chars(llm_server):
    llm_server.behaviour.chat_reply = "A very long summary sentence. " * 40
    summary = summarizer(llm_server, "ollama", max_chars=100).summarize("Long", "text")
    assert len(summary) <= 100


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_of_only_reasoning_is_unavailable(llm_server, provider):
    llm_server.behaviour.chat_reply = "<think>I ran out of tokens while"
    with pytest.raises(Unavailable, match="no summary"):
        summarizer(llm_server, provider).summarize("Release", "1. Tag")


@pytest.mark.parametrize("mode", ["error500", "garbage", "missing_field"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_broken_replies_are_unavailable(llm_server, provider, mode):
    llm_server.behaviour.mode = mode
    with pytest.raises(Unavailable):
        summarizer(llm_server, provider).summarize("Release", "1. Tag")


def test_http_error_message_names_status_and_endpoint_not_the_note(llm_server):
    llm_server.behaviour.mode = "error500"
    with pytest.raises(Unavailable) as caught:
        summarizer(llm_server, "ollama").summarize("Release", "secret plans for Tuesday")
    message = str(caught.value)
    assert "HTTP 500" in message and "/api/chat" in message and "Tuesday" not in message


def test_slow_server_times_out_as_unavailable(llm_server):
    llm_server.behaviour.hold = True  # no reply while the call waits: only its timeout ends it
    with pytest.raises(Unavailable, match="timed out"):
        summarizer(llm_server, "openai", timeout_seconds=0.2).summarize("Release", "1. Tag")


def test_refused_connection_is_unavailable():
    with pytest.raises(Unavailable, match="request failed"):
        summarizer(closed_port_url(), "ollama").summarize("Release", "1. Tag")


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_base_url_works_with_or_without_v1(llm_server, suffix):
    summarizer(llm_server, "openai", base_url=llm_server.url + suffix).summarize("R", "1. Tag")
    assert [s.path for s in llm_server.seen()] == ["/v1/chat/completions"]


def test_api_key_from_the_named_environment_variable_is_sent(llm_server, monkeypatch):
    monkeypatch.setenv("FAKE_CHAT_KEY", "sk-test-123")
    llm_server.behaviour.require_api_key = "sk-test-123"
    made = summarizer(llm_server, "openai", api_key_env="FAKE_CHAT_KEY")
    assert made.summarize("Release", "1. Tag") == "A short summary of the note."


def test_missing_api_key_variable_is_a_config_error(llm_server, monkeypatch):
    monkeypatch.delenv("FAKE_CHAT_KEY", raising=False)
    with pytest.raises(ConfigError, match="FAKE_CHAT_KEY"):
        summarizer(llm_server, "openai", api_key_env="FAKE_CHAT_KEY")


def test_name_is_provider_and_model(llm_server):
    assert summarizer(llm_server, "ollama").name == "ollama:fake-chat"
