"""The static model read straight from its files gives model2vec's vectors, without
model2vec's import cost; any other format is left to model2vec."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from vault_brain.config import EmbedSettings
from vault_brain.embed.local import BUNDLED_MODEL, LocalEmbedder
from vault_brain.embed.static import StaticModelFile
from vault_brain.errors import Unavailable

TEXTS = [
    "how do we deploy to production",
    "",
    "   ",
    "Wie bekomme ich eine gelöschte Notiz zurück?",
    "東京の天気は晴れ",
    "🙂🙂",
    "x" * 20_000,  # past max_length × median token length in characters
    "word " * 3_000,  # past max_length tokens
    "[UNK] [CLS] [SEP] plain",
    "a",
]


def model2vec_vectors(folder, texts):
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(folder, quantize_to="float32", force_download=False)
    return model.encode(texts, use_multiprocessing=False, normalize=False)


def test_the_bundled_model_gives_exactly_model2vecs_vectors():
    ours = StaticModelFile.load(BUNDLED_MODEL)
    assert ours is not None
    np.testing.assert_allclose(
        ours.encode(TEXTS), model2vec_vectors(BUNDLED_MODEL, TEXTS), rtol=0, atol=1e-6
    )


def test_many_texts_of_many_lengths_match_too():
    words = (BUNDLED_MODEL.parent.parent.parent.parent / "README.md").read_text().split()
    texts = [" ".join(words[i : i + 1 + i % 97]) for i in range(600)]
    ours = StaticModelFile.load(BUNDLED_MODEL).encode(texts)
    np.testing.assert_allclose(ours, model2vec_vectors(BUNDLED_MODEL, texts), rtol=0, atol=1e-6)


def test_a_model_with_per_token_weights_is_left_to_model2vec(tmp_path):
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "weighted"
    shutil.copytree(BUNDLED_MODEL, folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["weights"] = np.linspace(0.5, 1.5, len(tensors["embeddings"])).astype(np.float32)
    save_file(tensors, folder / "model.safetensors")
    assert StaticModelFile.load(folder) is None
    embedder = LocalEmbedder(EmbedSettings(model=str(folder)))
    vectors = embedder.embed(TEXTS[:1])
    reference = model2vec_vectors(folder, TEXTS[:1])
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "damage",
    [b"", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", b"\xff" * 64],
    ids=["empty", "bad header", "garbage"],
)
def test_a_damaged_model_file_is_a_clear_unavailable_error(tmp_path, damage):
    folder = tmp_path / "broken"
    shutil.copytree(BUNDLED_MODEL, folder)
    (folder / "model.safetensors").write_bytes(damage)
    with pytest.raises(Unavailable, match="cannot load embedding model local:broken"):
        LocalEmbedder(EmbedSettings(model=str(folder))).embed(["hello"])


def test_embedding_with_the_bundled_model_never_imports_model2vec():
    script = (
        "import sys\n"
        "from vault_brain.config import EmbedSettings\n"
        "from vault_brain.embed.local import LocalEmbedder\n"
        "LocalEmbedder(EmbedSettings()).embed(['hello'])\n"
        "print('model2vec' in sys.modules, 'huggingface_hub' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "False False", done.stderr


def test_unknown_tokens_are_dropped_as_a_per_token_loop_drops_them():
    """The unknown token is masked out of all texts' ids at once: each row is still exactly
    the mean of the text's known tokens' rows, and a text of unknown tokens only is zeros."""
    model = StaticModelFile.load(BUNDLED_MODEL)
    assert model.unk_id is not None
    texts = [
        *TEXTS,
        "🙂 smile 🙂 and ☃ snow ⚙ gear",
        "🙂🙂🙂 ☃☃",
        "mixed 🙂 text " * 40,
        *(f"note {i} about 🙂 {'words ' * (i % 7)}" for i in range(40)),  # a big batch
    ]
    got = model.encode(texts)
    table = model.stored.astype(np.float32)
    for text, row in zip(texts, got, strict=True):
        ids = model.tokenizer.encode(text[: model.max_chars], add_special_tokens=False).ids
        known = [i for i in ids if i != model.unk_id]
        if not known:
            assert not row.any(), text
            continue
        expected = table[np.array([known], dtype=np.int64)].mean(axis=1)[0]
        assert row.tobytes() == expected.tobytes(), text[:40]
    assert not got[TEXTS.index("🙂🙂")].any()
