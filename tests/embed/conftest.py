"""Fixtures for embedding providers: a real loopback LLM server and the bundled model."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # so `tests.fakes` imports however pytest is started
    sys.path.insert(0, str(REPO))

from tests.fakes.llm_server import FakeLLMServer  # noqa: E402
from vault_brain.config import EmbedSettings  # noqa: E402
from vault_brain.embed.local import LocalEmbedder  # noqa: E402


@pytest.fixture(scope="module")
def _running_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_server(_running_server: FakeLLMServer) -> FakeLLMServer:
    """One server per module (starting uvicorn costs time), with fresh switches per test."""
    _running_server.reset()
    return _running_server


@pytest.fixture(scope="module")
def bundled() -> LocalEmbedder:
    """The bundled model, loaded once per module."""
    return LocalEmbedder(EmbedSettings())


@pytest.fixture
def shared_dir() -> Path:
    """/work/shared (or VAULT_BRAIN_SHARED) beside the repository; skip when it is absent."""
    import os

    shared = Path(os.environ.get("VAULT_BRAIN_SHARED", REPO / ".." / "shared")).resolve()
    if not shared.is_dir():
        pytest.skip(f"shared folder {shared} is absent (set VAULT_BRAIN_SHARED)")
    return shared
