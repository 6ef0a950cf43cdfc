"""make_embedder picks the configured provider and keeps server start-up cheap."""

from __future__ import annotations

import subprocess
import sys

from vault_brain.config import EmbedSettings
from vault_brain.embed import l2_normalise, make_embedder
from vault_brain.embed.local import LocalEmbedder
from vault_brain.embed.remote import OllamaEmbedder, OpenAIEmbedder


def test_provider_none_gives_no_embedder():
    assert make_embedder(EmbedSettings(provider="none")) is None


def test_provider_local_gives_the_local_embedder():
    assert isinstance(make_embedder(EmbedSettings(provider="local")), LocalEmbedder)


def test_provider_ollama_gives_the_ollama_embedder():
    settings = EmbedSettings(provider="ollama", base_url="http://127.0.0.1:9", model="m")
    assert isinstance(make_embedder(settings), OllamaEmbedder)


def test_provider_openai_gives_the_openai_embedder():
    settings = EmbedSettings(provider="openai", base_url="http://127.0.0.1:9", model="m")
    assert isinstance(make_embedder(settings), OpenAIEmbedder)


def test_making_the_local_embedder_does_not_import_model2vec():
    script = (
        "import sys\n"
        "from vault_brain.config import EmbedSettings\n"
        "from vault_brain.embed import make_embedder\n"
        "make_embedder(EmbedSettings())\n"
        "print('model2vec' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "False"


def test_l2_normalise_leaves_zero_rows_zero_and_scales_huge_rows():
    out = l2_normalise([[0.0, 0.0], [3e300, 4e300]])
    assert out.dtype.name == "float32"
    assert out.tolist() == [[0.0, 0.0], [0.6000000238418579, 0.800000011920929]]
