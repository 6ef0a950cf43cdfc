"""Fixtures for summarizers: a real loopback server speaking Ollama and OpenAI chat."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture(scope="module")
def _running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_server(_running_server: FakeLLMServer) -> FakeLLMServer:
    """One server per module (starting uvicorn costs time), with fresh switches per test."""
    _running_server.reset()
    return _running_server
