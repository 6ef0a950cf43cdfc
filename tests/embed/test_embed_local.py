"""The local provider: model2vec on the model bundled inside the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.waiting import HANG_SECONDS
from vault_brain.config import EmbedSettings
from vault_brain.embed.local import BUNDLED_MODEL, LocalEmbedder
from vault_brain.errors import Unavailable


def test_constructing_does_not_load_the_model():
    embedder = LocalEmbedder(EmbedSettings())
    assert not embedder.loaded


def test_first_embed_loads_the_model():
    embedder = LocalEmbedder(EmbedSettings())
    embedder.embed(["hello"])
    assert embedder.loaded


def test_bundled_model_is_named_after_its_folder(bundled):
    assert bundled.name == "local:minilm-static-256"


def test_bundled_model_has_dimension_256(bundled):
    assert bundled.dimension() == 256


def test_embeddings_are_float32_rows_of_the_model_dimension(bundled):
    vectors = bundled.embed(["one note", "another note", "a third"])
    assert vectors.shape == (3, 256)
    assert vectors.dtype == np.float32


def test_embeddings_are_unit_length(bundled):
    vectors = bundled.embed(["Release checklist", "steps before tagging a release", "x y z"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_string_embeds_as_a_zero_vector_without_crashing(bundled):
    vectors = bundled.embed(["", "text"])
    assert vectors.shape == (2, 256)
    assert not vectors[0].any()
    assert np.isfinite(vectors).all()


def test_empty_list_gives_zero_rows(bundled):
    assert bundled.embed([]).shape == (0, 256)


def test_similar_sentences_are_closer_than_unrelated_ones(bundled):
    query, close, far = bundled.embed(
        [
            "How do I bake sourdough bread?",
            "A recipe for baking a sourdough loaf at home.",
            "Quarterly tax filing deadlines for small companies.",
        ]
    )
    assert float(query @ close) > float(query @ far) + 0.1


def test_same_text_gives_the_same_vector(bundled):
    first, second = bundled.embed(["stable output", "stable output"])
    assert np.array_equal(first, second)


def test_concurrent_first_use_loads_the_model_once(monkeypatch):
    from vault_brain.embed.static import StaticModelFile

    loads = []
    original = StaticModelFile.load.__func__

    def counting(cls, *args, **kwargs):  # a spy: the real load runs
        loads.append(args)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(StaticModelFile, "load", classmethod(counting))
    embedder = LocalEmbedder(EmbedSettings())
    threads = [threading.Thread(target=embedder.embed, args=(["hi"],)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1


def test_model_folder_path_is_loaded_and_named_after_the_folder(tmp_path):
    folder = tmp_path / "my-model"
    shutil.copytree(BUNDLED_MODEL, folder)
    embedder = LocalEmbedder(EmbedSettings(model=str(folder)))
    assert embedder.name == "local:my-model"
    assert embedder.embed(["text"]).shape == (1, 256)


def test_missing_model_folder_is_unavailable_on_first_use(tmp_path):
    embedder = LocalEmbedder(EmbedSettings(model=str(tmp_path / "no-such-model")))
    with pytest.raises(Unavailable, match="no-such-model"):
        embedder.embed(["text"])


def test_hub_id_that_cannot_be_fetched_is_unavailable(tmp_path):
    # A separate process: huggingface_hub reads HF_HUB_OFFLINE when it is imported.
    script = (
        "from vault_brain.config import EmbedSettings\n"
        "from vault_brain.embed.local import LocalEmbedder\n"
        "from vault_brain.errors import Unavailable\n"
        "e = LocalEmbedder(EmbedSettings(model='nobody/no-such-static-model'))\n"
        "try:\n"
        "    e.embed(['x'])\n"
        "except Unavailable as exc:\n"
        "    print('UNAVAILABLE', e.name, exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.stdout.startswith("UNAVAILABLE local:nobody/no-such-static-model")


def test_bundled_model_ships_license_and_model_card_within_16_mb():
    names = {p.name for p in BUNDLED_MODEL.iterdir()}
    assert {"LICENSE", "README.md", "model.safetensors", "tokenizer.json"} <= names
    assert "Apache License" in (BUNDLED_MODEL / "LICENSE").read_text(encoding="utf-8")
    assert sum(p.stat().st_size for p in BUNDLED_MODEL.iterdir()) <= 16 * 1024 * 1024


def test_bundled_model_agrees_with_the_shared_build(bundled, shared_dir: Path):
    shared_model = shared_dir / "models" / "minilm-static-256"
    if not shared_model.is_dir():
        pytest.skip(f"{shared_model} is absent")
    reference = LocalEmbedder(EmbedSettings(model=str(shared_model)))
    texts = ["Release checklist for tagging a version.", "Notes about sourdough bread."]
    cosines = (bundled.embed(texts) * reference.embed(texts)).sum(axis=1)
    assert cosines.min() > 0.999
