"""Many questions' nearest chunks in one search (index/port.py's `nearest_chunk_each`): the
vault's calibration asks its bank of ~440 questions at once (search/fit.py). Each answer
must be the one a search of that question alone gives (`nearest_chunks`, k=1, no filters,
no noise): the same chunk and the same score to the bit, since the fit is made of those
scores. Checked on a real vault (Obsidian Help, English: 534 chunks) with a real model's
vectors, on every backend and on each of their search paths."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from tests.conftest import every_backend, shared_path
from vault_brain.embed.base import embed_queries
from vault_brain.index.factory import open_index
from vault_brain.index.records import Filters
from vault_brain.search.calibration import bank_adjusted
from vault_brain.search.fit import Fit, bank_matrix, fit_tier, load_bank

backend = every_backend()

PREFIX = "obsidian-help/en/"
# One of the vault's notes twice more, under the same title: their chunks' vectors are its
# chunks' (a question near them finds three equal cosines: the first in its order answers).
TWIN = "Plugins/Word count.md"
COPIES = ("Twins/One/Word count.md", "Twins/Two/Word count.md")


@pytest.fixture
def help_vault(vault, make_brain):
    """The English Obsidian Help vault, two copies of one of its notes beside it, indexed
    with the instant model's vectors."""
    archive = shared_path("corpora", "obsidian-help.tar.gz")
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(PREFIX) and member.name.endswith(".md"):
                raw = tar.extractfile(member).read()  # type: ignore[union-attr]
                vault.write(member.name[len(PREFIX) :], raw)
    for rel in COPIES:
        vault.write(rel, vault.read(TWIN))
    model = str(shared_path("models", "minilm-static-256"))
    return make_brain(embed={"provider": "local", "model": model})


def _questions(brain) -> np.ndarray:
    """The bank's questions, a few of them twice, two questions whose nearest chunks have
    twins, and a vector no text gives (zero)."""
    bank = bank_matrix(brain.embedder, None)
    twins = embed_queries(
        brain.embedder,
        [
            "Word count displays the number of words and characters of the active note",
            "On desktop word count appears in the status bar",
        ],
    )
    zero = np.zeros((1, bank.shape[1]), dtype=np.float32)
    return np.vstack([bank, bank[:3], np.asarray(twins, dtype=np.float32), zero])


def _one_by_one(reads, model: str, vectors: np.ndarray) -> list:
    return [
        (lambda hits: hits[0] if hits else None)(
            reads.nearest_chunks(model, v, Filters(), k=1, tier="instant", noise=False).hits
        )
        for v in vectors
    ]


def test_each_questions_nearest_chunk_is_the_one_its_own_search_finds(help_vault, monkeypatch):
    from vault_brain.index.sqlite import matrix

    # SQLite's product in blocks of 100 rows (the best so far carried across them), and
    # rescored in slices (the last one longer).
    monkeypatch.setattr(matrix, "BLOCK_ROWS", 100)
    brain = help_vault
    with brain.index.read() as r:
        assert r.counts().vectors > 2 * matrix.SLICE_ROWS + 1
        questions = _questions(brain)
        batched = r.nearest_chunk_each(brain.embedder.name, questions, tier="instant")
        alone = _one_by_one(r, brain.embedder.name, questions)
    assert len(batched) == len(questions)
    assert batched[-1] is None  # the zero vector matches nothing
    assert all(hit is not None for hit in batched[:-1])
    with brain.index.read() as r:
        twins = {
            r.note_by_path(rel).rowid: rel  # type: ignore[union-attr]
            for rel in (TWIN, *COPIES)
        }
    assert {twins.get(hit.note_rowid) for hit in batched[-3:-1]} <= set(twins.values())
    # Same chunks, same scores: bit for bit (ChunkHit compares its float exactly).
    assert batched == alone


def test_a_one_shot_process_answers_the_same(help_vault):
    """A one-shot process holds no vectors in memory: SQLite's sqlite-vec answers there."""
    brain = help_vault
    index = open_index(brain.settings, one_shot=True)
    try:
        with index.read() as r:
            questions = _questions(brain)
            batched = r.nearest_chunk_each(brain.embedder.name, questions, tier="instant")
            alone = _one_by_one(r, brain.embedder.name, questions)
    finally:
        index.close()
    assert batched[-1] is None and batched == alone


def test_a_tier_without_vectors_finds_nothing_and_no_questions_get_no_answers(help_vault):
    brain = help_vault
    questions = _questions(brain)
    with brain.index.read() as r:
        assert r.vectors_model("strong") is None
        assert r.nearest_chunk_each(brain.embedder.name, questions, tier="strong") == [None] * len(
            questions
        )
        assert r.nearest_chunk_each(brain.embedder.name, questions[:0], tier="instant") == []


def test_past_the_exact_scan_postgres_answers_each_as_its_own_hnsw_search(
    help_vault, backend, monkeypatch
):
    """A larger Postgres index answers by HNSW: each question walks the graph as its own
    search would (same ef_search), so its answer is that search's."""
    if backend != "postgres":
        pytest.skip("Postgres's HNSW path")
    from vault_brain.index.postgres import store

    monkeypatch.setattr(store, "EXACT_VECTORS", 100)
    brain = help_vault
    with brain.index.read() as r:
        questions = _questions(brain)
        batched = r.nearest_chunk_each(brain.embedder.name, questions, tier="instant")
        alone = _one_by_one(r, brain.embedder.name, questions)
    assert batched[-1] is None and batched == alone


def _fit_one_by_one(brain) -> Fit:
    """The fit as search/fit.py made it before: one search a bank question."""
    bank = load_bank()
    vectors = bank_matrix(brain.embedder, None)
    with brain.index.read() as r:
        notes = r.counts().notes
        positions = np.asarray([i for qs in bank.values() for i in range(len(qs))])
        sims = vectors @ vectors.T
        sims[positions[:, None] == positions[None, :]] = -1.0
        likeness = sims.max(axis=1)
        tops: dict[str, list[float]] = {}
        at = 0
        for lang, qs in bank.items():
            for i in range(at, at + len(qs)):
                found = r.nearest_chunks(
                    brain.embedder.name, vectors[i], Filters(), k=1, tier="instant", noise=False
                )
                if found.hits:
                    adjusted = bank_adjusted(found.hits[0].score, float(likeness[i]), notes)
                    tops.setdefault(lang, []).append(adjusted)
            at += len(qs)
    return Fit(brain.embedder.name, notes, {k: tuple(sorted(v)) for k, v in tops.items()})


def test_the_fit_is_the_one_a_search_a_question_made(help_vault):
    brain = help_vault
    fit = fit_tier(brain.index, brain.embedder, "instant")
    before = _fit_one_by_one(brain)
    assert fit is not None
    assert (fit.model, fit.notes, fit.coverage, fit.tops) == (
        before.model,
        before.notes,
        before.coverage,
        before.tops,
    )
    assert {lang: fit.floor(lang) for lang in fit.tops} == {
        lang: before.floor(lang) for lang in before.tops
    }
