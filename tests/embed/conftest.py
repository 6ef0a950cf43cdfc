"""Fixtures for embedding providers: the bundled model, the shared folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from vault_brain.config import EmbedSettings
from vault_brain.embed.local import LocalEmbedder

REPO = Path(__file__).resolve().parents[2]


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
