"""A one-shot process's vector search (index/sqlite/matrix.py `scan`): it holds no copy of
the vectors and reads sqlite-vec's chunks of them one at a time, and must give what the
in-memory matrix of a long-running process gives (VectorMatrix.search): the same chunks,
the same scores and noise to the bit, with filters, once vectors were deleted (holes in
sqlite-vec's chunks) and over more than one of its chunks. Checked on a real vault (the
English Obsidian Help, twice: ~1,070 chunks, more than one sqlite-vec chunk of 1,024) with
a real model's vectors."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from tests.conftest import shared_path
from vault_brain.embed.base import embed_queries
from vault_brain.index.factory import open_index
from vault_brain.index.records import Filters, VectorHits
from vault_brain.index.sqlite import matrix, vecscan
from vault_brain.search.fit import bank_matrix

PREFIX = "obsidian-help/en/"
QUESTIONS = (
    "how do I link to a heading in another note",
    "sync my vault between phone and desktop",
    "keyboard shortcut for the command palette",
    "Wie erstelle ich eine neue Notiz?",
    "embed an image in a note",
)


@pytest.fixture
def twice_vault(vault, make_brain):
    """The English Obsidian Help vault twice (under A/ and B/), indexed with the instant
    model's vectors."""
    archive = shared_path("corpora", "obsidian-help.tar.gz")
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(PREFIX) and member.name.endswith(".md"):
                raw = tar.extractfile(member).read()  # type: ignore[union-attr]
                for copy in ("A", "B"):
                    vault.write(f"{copy}/{member.name[len(PREFIX) :]}", raw)
    model = str(shared_path("models", "minilm-static-256"))
    return make_brain(embed={"provider": "local", "model": model})


def _questions(brain) -> np.ndarray:
    asked = np.asarray(embed_queries(brain.embedder, list(QUESTIONS)), dtype=np.float32)
    return np.vstack([asked, bank_matrix(brain.embedder, None)[:40]])


def _both(brain, questions, filters: Filters, k: int = 60) -> list[tuple[VectorHits, VectorHits]]:
    """(the one-shot process's answer, the long-running one's) for each question."""
    model = brain.embedder.name
    one_shot = open_index(brain.settings, one_shot=True)
    try:
        with one_shot.read() as r1, brain.index.read() as r2:
            return [
                (
                    r1.nearest_chunks(model, v, filters, k=k, tier="instant", noise=noise),
                    r2.nearest_chunks(model, v, filters, k=k, tier="instant", noise=noise),
                )
                for v in questions
                for noise in (True, False)
            ]
    finally:
        one_shot.close()


def _slots(brain) -> list[tuple[int, int]]:
    """(slots, valid rows) of each sqlite-vec chunk of the instant tier."""
    with brain.index.read() as r:
        return [
            (size, int(np.unpackbits(np.frombuffer(bits, np.uint8))[:size].sum()))
            for _, size, bits, _ in r.vector_slots("instant")
        ]


def test_a_one_shot_scan_answers_as_the_in_memory_matrix(twice_vault):
    brain = twice_vault
    slots = _slots(brain)
    assert len(slots) >= 2  # the scan crosses sqlite-vec's chunks
    questions = _questions(brain)
    pairs = _both(brain, questions, Filters())
    assert all(a.hits for a, _ in pairs)
    assert [a for a, _ in pairs] == [b for _, b in pairs]  # ChunkHit floats compare exactly
    folder = _both(brain, questions[:10], Filters(folder="B/Linking notes and files"))
    assert any(a.hits for a, _ in folder)
    assert all(h.note_rowid for a, _ in folder for h in a.hits)
    assert [a for a, _ in folder] == [b for _, b in folder]


def test_after_deletions_the_scan_still_answers_as_the_matrix(twice_vault, vault):
    """Notes removed: sqlite-vec leaves holes in its chunks, so the rows after them sit
    elsewhere than in the matrix; the slices are gathered as the matrix's."""
    brain = twice_vault
    folders = ("Linking notes and files", "Editing and formatting")
    gone = sorted(p for p in vault.root.rglob("*.md") if p.parts[-2] in folders)
    assert gone
    for path in gone[::2]:
        path.unlink()
    brain.sync()
    brain.embed_pending()
    slots = _slots(brain)
    assert any(valid < size for size, valid in slots[:-1])  # a hole before the last chunk
    questions = _questions(brain)
    pairs = _both(brain, questions, Filters())
    assert [a for a, _ in pairs] == [b for _, b in pairs]
    tagged = _both(brain, questions[:8], Filters(since="2000-01-01"))
    assert [a for a, _ in tagged] == [b for _, b in tagged]


def test_a_tier_without_vectors_finds_nothing(twice_vault):
    brain = twice_vault
    one_shot = open_index(brain.settings, one_shot=True)
    try:
        with one_shot.read() as r:
            assert r.vector_slots("strong") == []
            v = np.ones(384, dtype=np.float32) / np.sqrt(384)
            found = matrix.scan(r, v, Filters(), 10, "strong")
            assert found == VectorHits([], 0.0, 0.0)
    finally:
        one_shot.close()


def test_past_max_rows_the_scan_gives_way_to_the_knn(twice_vault):
    brain = twice_vault
    questions = _questions(brain)[:3]
    with brain.index.read() as r:
        for v in questions:
            assert matrix.scan(r, v, Filters(), 10, "instant", max_rows=100) is None
            assert matrix.scan(r, v, Filters(), 10, "instant") is not None


def fixed_order_products(rows: np.ndarray, v: np.ndarray, lanes: int = 16) -> np.ndarray:
    """The C module's products (native/querynative.c `dot`) in float32 numpy steps: lane j
    sums the terms j, j + lanes, ... in order (a multiply, then an add), the tail goes to
    the first lanes, then the lanes are added pairwise, halves onto halves."""
    acc = np.zeros((len(rows), lanes), dtype=np.float32)
    width = rows.shape[1]
    whole = width - width % lanes
    for i in range(0, whole, lanes):
        acc += rows[:, i : i + lanes] * v[i : i + lanes]
    tail = width - whole
    if tail:
        acc[:, :tail] += rows[:, whole:] * v[whole:]
    half = lanes // 2
    while half >= 1:
        acc[:, :half] += acc[:, half : 2 * half]
        half //= 2
    return acc[:, 0].copy()


def test_slice_products_are_each_slices_own_product():
    """However the rows come in blocks, each slice of SLICE_ROWS rows is scored as one
    contiguous array: the same floats as the matrix's slices. With the C module built,
    each row's product in its fixed order instead, wherever the row lies."""
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((3 * matrix.SLICE_ROWS + 37, 45)).astype(np.float32)
    v = rng.standard_normal(45).astype(np.float32)
    whole = matrix.slice_products([rows], len(rows), v)
    if vecscan.native() is not None:
        expected = fixed_order_products(rows, v)
    else:
        expected = np.concatenate(
            [rows[i : i + matrix.SLICE_ROWS] @ v for i in range(0, len(rows), matrix.SLICE_ROWS)]
        )
    assert whole.tobytes() == expected.tobytes()
    cuts = [0, 5, 300, 301, 700, len(rows)]
    blocks = [rows[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    assert matrix.slice_products(blocks, len(rows), v).tobytes() == expected.tobytes()
