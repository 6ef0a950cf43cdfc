"""The reusable fake LLM server answers chat in both protocols (summaries rely on it)."""

from __future__ import annotations

import httpx

from tests.fakes.llm_server import FakeLLMServer


def test_ollama_chat_returns_the_configured_reply(llm_server: FakeLLMServer):
    llm_server.behaviour.chat_reply = "<think>hmm</think>The summary."
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    reply = httpx.post(llm_server.url + "/api/chat", json=body).json()
    assert reply["message"]["content"] == "<think>hmm</think>The summary."


def test_openai_chat_returns_the_configured_reply(llm_server: FakeLLMServer):
    llm_server.behaviour.chat_reply = "Plain summary."
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = httpx.post(llm_server.url + "/v1/chat/completions", json=body).json()
    assert reply["choices"][0]["message"]["content"] == "Plain summary."


def test_chat_requests_are_recorded_with_their_messages(llm_server: FakeLLMServer):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    httpx.post(llm_server.url + "/v1/chat/completions", json=body)
    (seen,) = llm_server.seen("/v1/chat/completions")
    assert seen.messages == ({"role": "user", "content": "hi"},)


def test_chat_fails_with_500_when_switched(llm_server: FakeLLMServer):
    llm_server.behaviour.mode = "error500"
    response = httpx.post(llm_server.url + "/api/chat", json={"model": "m", "messages": []})
    assert response.status_code == 500
