"""The vault calibrates itself (search/fit.py): what "no relation" scores is measured on the
vault, with its model, in the question's language, and search's cut-off follows it. The
quality of the result is measured in bench/calibration.py; these tests check the mechanism."""

from __future__ import annotations

import json

import pytest

from tests.conftest import every_backend, shared_path
from vault_brain.embed.base import embed_queries
from vault_brain.search.calibration import (
    FITTED_SPAN,
    HIGH,
    LARGE_NOTES,
    LOW,
    MEDIUM,
    SMALL_MARGIN,
    SMALL_NOTES,
    SMALL_QUANTILE,
    bank_weight,
    confidence,
    fitted_floor,
    fitted_scale,
    text_evidence,
    vector_evidence,
)
from vault_brain.search.fit import Fit, bank_matrix, load_bank, meta_key

# The fit is kept in the index and read back at search time: on every backend.
backend = every_backend()

NOTES = {
    "Home/Network.md": "# Home network\n\nThe router is a FritzBox 7590. The 5 GHz band is "
    "pinned to channel 36; the guest network password hangs on the fridge.\n",
    "Kitchen/Sourdough.md": "# Sourdough\n\nFeed the starter the evening before, 75 % "
    "hydration, bake at 250 degrees with the lid on for 20 minutes.\n",
    "Car/Service.md": "# Car service\n\nThe Golf takes 5W-30 oil. Brake pads replaced in "
    "March; winter tyres are stored at the garage on Mill Road.\n",
    "Work/On-call.md": "# On-call rota\n\nPages escalate to the secondary after 15 minutes "
    "without an acknowledgement. Swap weeks in the rota sheet.\n",
}


def test_the_bank_asks_in_many_languages_with_enough_questions_each():
    bank = load_bank()
    assert len(bank) >= 10
    assert all(len(questions) >= 30 for questions in bank.values()), {
        lang: len(qs) for lang, qs in bank.items()
    }
    assert len({q for qs in bank.values() for q in qs}) == sum(len(qs) for qs in bank.values())


def test_a_fit_round_trips_through_json_and_a_damaged_one_is_none():
    fit = Fit("m", 40, {"en": (0.8, 0.81, 0.83), "ru": (0.79, 0.8)}, fitted_at=5.0)
    assert Fit.from_json(fit.to_json()) == fit
    assert Fit.from_json("{not json") is None
    assert Fit.from_json(json.dumps({"model": "m"})) is None
    assert Fit.from_json(None) is None


def test_a_fit_of_raw_cosines_from_before_is_not_used_and_the_vault_is_fitted_again(instant):
    """Fits made before the bank adjustment hold raw cosines: read on the adjusted scale
    they would cut wrongly, so they are set aside and measured again."""
    brain, _ = instant
    old = json.loads(Fit("m", 4, {"en": (0.8,)}).to_json())
    del old["kind"]
    assert Fit.from_json(json.dumps(old)) is None
    old["model"] = brain.embedder.name
    with brain.index.transaction() as w:
        w.set_meta(meta_key("instant"), json.dumps(old))
    assert brain.calibrate() == ["instant"]
    assert _stored(brain, "instant") is not None


def test_a_fit_is_redone_for_another_model_or_a_tenth_more_or_fewer_notes():
    fit = Fit("e5", 200, {"en": (0.8,)})
    assert not fit.due("e5", 200)
    assert not fit.due("e5", 215)  # 7.5 %: not yet
    assert fit.due("e5", 221) and fit.due("e5", 179)
    assert fit.due("other-model", 200)
    assert not Fit("e5", 8, {"en": (0.8,)}).due("e5", 10)  # 2 notes: too few to matter


def test_a_fit_of_part_of_the_vectors_is_redone_as_they_cover_more_and_at_full_coverage():
    """The strong tier is fitted once every note's lead is in (a quarter of the chunks):
    more chunks reach higher cosines, so the fit follows them, then is made at full
    coverage like any other."""
    partial = Fit("e5", 200, {"en": (0.8,)}, fitted_at=5.0, coverage=0.25)
    assert Fit.from_json(partial.to_json()) == partial
    assert not partial.due("e5", 200, 0.3)
    assert partial.due("e5", 200, 0.35)  # a tenth of the chunks more
    assert partial.due("e5", 200, 0.99)
    full = Fit("e5", 200, {"en": (0.8,)}, fitted_at=5.0)
    assert full.coverage == 1.0 and not full.due("e5", 200, 0.5)  # a note added meanwhile
    old = json.loads(full.to_json())
    del old["coverage"]  # stored before fits said their coverage: made at full coverage
    assert Fit.from_json(json.dumps(old)) == full


def test_only_a_small_vault_reads_cosines_less_their_likeness_to_the_bank():
    assert bank_weight(4) == bank_weight(SMALL_NOTES) > 0.0
    assert bank_weight(SMALL_NOTES) > bank_weight(45) > bank_weight(LARGE_NOTES) == 0.0
    assert bank_weight(9746) == 0.0


def test_a_small_vault_cuts_lower_than_a_large_one_on_the_same_bank_scores():
    tops = [0.76 + 0.002 * i for i in range(40)]
    small, middle, large = (fitted_floor(tops, n) for n in (8, 45, 5000))
    at = SMALL_QUANTILE * (len(tops) - 1)
    assert small == pytest.approx(0.76 + 0.002 * at + SMALL_MARGIN)
    assert small < middle < large
    assert fitted_floor(tops, SMALL_NOTES) == small
    assert fitted_floor(tops, LARGE_NOTES) == large


def test_the_floor_of_a_language_not_in_the_bank_comes_from_its_script_then_from_all():
    fit = Fit("m", 500, {"en": (0.80,) * 5, "de": (0.82,) * 5, "ru": (0.70,) * 5})
    assert fit.floor("en") < fit.floor("de")
    assert fit.floor("nl") == pytest.approx((fit.floor("en") + fit.floor("de")) / 2)
    assert fit.floor("uk") == fit.floor("ru")  # Cyrillic
    assert fit.floor("th") == pytest.approx(fit.floor("en"))  # no Thai script: all (median)


def test_the_word_coverage_off_topic_questions_reach_is_no_evidence_when_vectors_answer():
    """Off-topic questions share up to 0.57 of their information with some note (measured
    on the Obsidian sets): with calibrated vectors answering too, that is not evidence;
    full text alone still counts it."""
    assert text_evidence(0.57, vectors_decide=True) == 0.0
    assert text_evidence(0.8, vectors_decide=True) >= LOW
    assert text_evidence(0.57, vectors_decide=False) >= LOW


def test_the_floor_gives_the_lowest_confidence_and_the_span_reaches_high():
    scale = fitted_scale(0.85)
    assert vector_evidence(0.85, 0, 0, scale) == pytest.approx(LOW)
    assert vector_evidence(0.85 - LOW * FITTED_SPAN, 0, 0, scale) == pytest.approx(0.0)
    assert confidence(vector_evidence(0.849, 0, 0, scale)) == "none"
    assert confidence(vector_evidence(0.86, 0, 0, scale)) == "low"
    assert confidence(vector_evidence(0.875, 0, 0, scale)) == "medium"
    assert confidence(vector_evidence(0.9, 0, 0, scale)) == "high"
    assert [confidence(s) for s in (HIGH, MEDIUM, LOW, 0.0)] == ["high", "medium", "low", "none"]


@pytest.fixture
def instant(vault, make_brain):
    """A vault on the instant static model (fast): what the fit does, not how well."""
    model = str(shared_path("models", "minilm-static-256"))
    for rel, text in NOTES.items():
        vault.write(rel, text)
    return make_brain(embed={"provider": "local", "model": model}), vault


def _stored(brain, tier: str) -> Fit | None:
    with brain.index.read() as r:
        return Fit.from_json(r.get_meta(meta_key(tier)))


def test_calibrating_measures_the_bank_in_the_vault_and_keeps_it_in_the_index(instant):
    brain, _ = instant
    assert _stored(brain, "instant") is None
    assert brain.calibrate() == ["instant"]
    fit = _stored(brain, "instant")
    bank = load_bank()
    assert fit.model == brain.embedder.name and fit.notes == len(NOTES)
    assert set(fit.tops) <= set(bank) and len(fit.tops) >= 8
    assert all(all(-1.0 <= t <= 1.0 for t in tops) for tops in fit.tops.values())
    assert brain.calibrate() == []  # not due again


def test_a_vault_that_grew_by_a_tenth_is_calibrated_again(instant):
    brain, vault = instant
    brain.calibrate()
    for n in range(3):
        vault.write(f"More/Note {n}.md", f"# Note {n}\n\nAbout kayaks and paddles, part {n}.\n")
    brain.sync()
    brain.embed_pending()
    assert brain.calibrate() == []  # 3 of 4 notes more, but under REFIT_MIN_NOTES
    for n in range(3, 8):
        vault.write(f"More/Note {n}.md", f"# Note {n}\n\nAbout kayaks and paddles, part {n}.\n")
    brain.sync()
    brain.embed_pending()
    assert brain.calibrate() == ["instant"]
    assert _stored(brain, "instant").notes == len(NOTES) + 8


def test_search_scores_vectors_against_the_fitted_floor_of_the_questions_language(instant):
    """On a small vault a hit's cosine is read less a share of the question's cosine to the
    nearest bank question, against the floor the bank's questions set on that same scale."""
    brain, _ = instant
    brain.calibrate()
    fit = _stored(brain, "instant")
    floor, weight = fit.floor("en"), bank_weight(fit.notes)
    assert weight > 0.0
    query = "which channel is the 5 GHz band on"
    found = brain.search(query, mode="vector", min_score=0.0, explain=True)
    assert found.hits[0].path == "Home/Network.md"
    vector = embed_queries(brain.embedder, [query])[0]
    likeness = float((bank_matrix(brain.embedder, None) @ vector).max())
    assert 0.0 < likeness < 1.0
    evidence = [
        max(
            0.0,
            min(
                1.0,
                (h.explain["vector"]["score"] - weight * likeness - floor) / FITTED_SPAN + LOW,
            ),
        )
        for h in found.hits
    ]
    for i, hit in enumerate(found.hits):
        # A hit scores its own evidence, or more when a hit below it scored more (scores
        # never rise down the list).
        assert hit.score == pytest.approx(max(evidence[i:]), abs=1e-4)


def test_hits_say_their_confidence_and_nothing_relevant_means_none_reached_low(instant):
    brain, _ = instant
    brain.calibrate()
    for query in ("pinned wifi channel", "xyzzyplugh frobnicate", "oil for the Golf"):
        every = brain.search(query, min_score=0.0)
        kept = brain.search(query)
        assert [h.path for h in kept.hits] == [h.path for h in every.hits if h.score >= LOW]
        assert kept.nothing_relevant == (not any(h.score >= LOW for h in every.hits))
        for hit in every.hits:
            assert hit.confidence == confidence(hit.score)


def test_the_bank_vectors_are_computed_once_per_model_and_machine(vault, make_brain, tmp_path):
    model = str(shared_path("models", "minilm-static-256"))
    for rel, text in NOTES.items():
        vault.write(rel, text)
    cache = tmp_path / "cache"
    brain = make_brain(embed={"provider": "local", "model": model, "cache_dir": str(cache)})
    brain.calibrate()
    (kept,) = cache.glob("models/bank-*.npy")
    first = kept.stat().st_mtime_ns
    assert brain.calibrate(force=True) == ["instant"]
    assert kept.stat().st_mtime_ns == first  # read back, not embedded and written again
    kept.write_bytes(b"damaged")
    assert brain.calibrate(force=True) == ["instant"]  # a damaged file is embedded anew
    assert kept.read_bytes() != b"damaged"


def test_a_question_whose_words_do_not_say_its_language_is_read_in_the_vaults_main_one(
    vault, make_brain
):
    """ "recette de la blanquette de veau" reads as English on its own words; asked of a
    French vault it is cut against the French floor, not the English one."""
    from vault_brain.text.analysis import detect_language

    query = "recette de la blanquette de veau"
    assert detect_language(query) == "en" and detect_language(query, default="fr") == "fr"
    model = str(shared_path("models", "minilm-static-256"))
    for n, (title, body) in enumerate(FRENCH.items()):
        vault.write(f"Cuisine/{n}.md", f"# {title}\n\n{body}\n")
    brain = make_brain(embed={"provider": "local", "model": model})
    assert brain.calibrate() == ["instant"]
    fit = _stored(brain, "instant")
    # Every hit passes the English floor; none reaches the French one.
    crafted = Fit(fit.model, fit.notes, {"en": (-1.0,) * 5, "fr": (0.99,) * 5})
    with brain.index.transaction() as w:
        w.set_meta(meta_key("instant"), crafted.to_json())
    assert brain.search(query, mode="vector", min_score=0.0).hits  # the vectors answer
    found = brain.search(query, mode="vector")
    assert found.hits == [] and found.nothing_relevant


FRENCH = {
    "Pot-au-feu": "Le pot-au-feu se prépare avec du bœuf, des carottes et des poireaux; "
    "il faut le laisser mijoter pendant trois heures.",
    "Tarte aux pommes": "Pour la tarte, il faut une pâte brisée et des pommes coupées en "
    "lamelles, puis la cuire au four pendant quarante minutes.",
    "Ratatouille": "Les légumes de la ratatouille sont cuits séparément avant d'être "
    "réunis dans la cocotte avec de l'huile d'olive.",
    "Quiche lorraine": "La quiche est faite avec des lardons, de la crème et des œufs; "
    "elle se mange chaude ou froide.",
}
