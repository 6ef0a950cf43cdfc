"""Search: full text, vectors, fusion, filters, languages, degradation."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import every_backend
from vault_brain.config import SearchSettings
from vault_brain.errors import InvalidInput
from vault_brain.search.base import ArmResult, NoteHit
from vault_brain.search.fusion import ADAPTIVE_COVERAGE, fuse_adaptive, fuse_convex, fuse_rrf
from vault_brain.search.snippets import _MARKUP, _drop_comments, make_snippet, plain_text

backend = every_backend()

NOTES = {
    "How-to/Deploy.md": "---\ntags: [ops]\n---\n# Deploy to production\n\n"
    "Run the pipeline, wait for the canary, then promote the release to production.\n",
    "How-to/Backup.md": "# Postgres backup\n\nWe take nightly base backups with pgBackRest "
    "and keep WAL archives for point-in-time recovery. #ops/db\n",
    "Cooking/番茄炒蛋.md": "# 番茄炒蛋\n\n番茄炒蛋是一道家常菜。先把鸡蛋炒熟，再放番茄。\n",
    "Meetings/Ретро.md": "# Ретроспектива спринта\n\n"
    "Обсудили ретроспективу и планирование релиза.\n",
    "Daily/2026-11-23.md": "Worked on the deploy script and the canary dashboard.\n",
}


@pytest.fixture
def filled(vault, make_brain):
    for rel, text in NOTES.items():
        vault.write(rel, text)
    return make_brain()


def test_question_finds_note_without_every_word_matching(filled):
    result = filled.search("how do we deploy our service to production?", mode="fts")
    assert result.hits[0].path == "How-to/Deploy.md"


def test_stemming_matches_word_forms(filled):
    assert filled.search("backups recovering", mode="fts").hits[0].path == "How-to/Backup.md"


def test_chinese_text_is_found_by_a_chinese_query(filled):
    hits = filled.search("怎么做番茄炒蛋", mode="fts").hits
    assert hits and hits[0].path == "Cooking/番茄炒蛋.md"


def test_russian_text_is_found(filled):
    hits = filled.search("ретроспектива", mode="fts").hits
    assert hits and hits[0].path == "Meetings/Ретро.md"


def test_tag_filter_includes_nested_tags(filled):
    paths = {h.path for h in filled.search("backup deploy", mode="fts", tags=["ops"]).hits}
    assert paths == {"How-to/Deploy.md", "How-to/Backup.md"}


def test_folder_filter(filled):
    paths = {h.path for h in filled.search("deploy canary", mode="fts", folder="Daily").hits}
    assert paths == {"Daily/2026-11-23.md"}


def test_date_filter_uses_updated_or_mtime(filled):
    assert filled.search("deploy", mode="fts", since="2999-01-01T00:00:00Z").hits == []
    assert filled.search("deploy", mode="fts", until="2999-01-01T00:00:00Z").hits


def test_hits_are_compact(filled):
    hit = filled.search("postgres backup", mode="fts").hits[0]
    assert hit.id and hit.title == "Postgres backup" and hit.summary
    assert len(hit.snippet) <= 240
    assert "pgBackRest" in hit.snippet


def test_hybrid_without_embeddings_answers_from_full_text_and_says_degraded(filled):
    result = filled.search("postgres backup")
    assert result.degraded
    assert result.hits[0].path == "How-to/Backup.md"


def test_punctuation_only_query_returns_nothing_not_an_error(filled):
    assert filled.search("?!*", mode="fts").hits == []


def test_empty_query_is_invalid_input(filled):
    with pytest.raises(InvalidInput):
        filled.search("   ")


def test_vector_search_finds_paraphrase(vault, make_brain):
    for rel, text in NOTES.items():
        vault.write(rel, text)
    brain = make_brain(embed={"provider": "local"})
    assert brain.status().vectors > 0
    # The instant model ranks the paraphrase first, at a cosine (~0.7) under what it may
    # claim as evidence (tests/test_relevance.py): the ranking is what this test is about.
    result = brain.search("restore the database from an archive", mode="vector", min_score=0)
    assert not result.degraded
    assert result.hits[0].path == "How-to/Backup.md"
    hybrid = brain.search("postgres backup")
    assert not hybrid.degraded and hybrid.hits[0].path == "How-to/Backup.md"


def test_changing_the_embedding_model_never_mixes_vectors(vault, make_brain, tmp_path):
    vault.write("a.md", NOTES["How-to/Backup.md"])
    brain = make_brain(embed={"provider": "local"})
    assert brain.status().vectors == 1
    # A different embedder identity on the same index: vectors are rebuilt, never mixed.
    other = make_brain(sync=False, embed={"provider": "none"})
    assert other.search("backup").degraded
    assert other.status().vectors == 0


def _arms(fts, vec):
    def hits(pairs):
        return [NoteHit(n, n * 10, s) for n, s in pairs]

    return [ArmResult("fts", hits(fts)), ArmResult("vector", hits(vec))]


def test_convex_fusion_keeps_a_strong_full_text_winner():
    arms = _arms([(1, 9.0), (2, 3.0), (3, 1.0)], [(3, 0.50), (2, 0.49), (1, 0.48)])
    assert fuse_convex(arms, SearchSettings(vector_weight=0.3))[0].note_rowid == 1


def test_convex_fusion_promotes_a_note_both_arms_agree_on():
    arms = _arms([(1, 5.0), (2, 4.9), (3, 1.0)], [(2, 0.9), (3, 0.5), (1, 0.1)])
    assert fuse_convex(arms, SearchSettings(vector_weight=0.3))[0].note_rowid == 2


def _covered(arms, coverage):
    fts, vec = arms
    evidence = {h.note_rowid: coverage for h in fts.hits}
    return [ArmResult("fts", fts.hits, evidence=evidence), vec]


def test_adaptive_fusion_is_convex_when_the_notes_hold_the_questions_words():
    arms = _covered(_arms([(1, 9.0), (2, 3.0), (3, 1.0)], [(3, 0.5), (2, 0.49), (1, 0.48)]), 0.6)
    settings = SearchSettings(vector_weight=0.3)
    assert fuse_adaptive(arms, settings) == fuse_convex(arms, settings)


def test_adaptive_fusion_lets_the_vectors_order_a_question_the_notes_have_no_words_for():
    """A question in another language than every note: full text matches a stray word (a
    product name, a number), the vectors found the answer; 1 - w of the order must not go
    to the stray match."""
    arms = _covered(_arms([(1, 9.0), (2, 8.0)], [(3, 0.9), (2, 0.8), (1, 0.2)]), 0.0)
    settings = SearchSettings(vector_weight=0.4)
    assert fuse_convex(arms, settings)[0].note_rowid == 1
    assert [h.note_rowid for h in fuse_adaptive(arms, settings)] == [3, 2, 1]
    halfway = _covered(arms, ADAPTIVE_COVERAGE / 2)
    first = fuse_adaptive(halfway, settings)[0]
    assert first.note_rowid == 3 and first.score == pytest.approx(0.7)  # weight 0.4 + 0.6 / 2


def test_rrf_with_equal_weights_is_classic_rrf():
    arms = _arms([(1, 9.0), (2, 3.0)], [(2, 0.9), (1, 0.1)])
    fused = fuse_rrf(arms, SearchSettings(rrf_k=60, vector_weight=0.5))
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)


def test_snippet_centres_on_the_query_term():
    text = "intro " * 100 + "the pgBackRest retention policy keeps 14 days " + "tail " * 100
    snippet = make_snippet(text, ["pgbackrest"], 240)
    assert "pgBackRest" in snippet and len(snippet) <= 240


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t\n\u00a0\u2003*_`~>|ab#-1.[]()!<", max_size=80))
def test_plain_text_folds_marks_and_whitespace_into_single_spaces(text):
    """Every run of emphasis marks and whitespace is one space, none at the ends, and a
    pattern skipped for want of its literal changes nothing: what every pattern run in
    turn, then `[*_`~>|]+` and `\\s+` as two regex passes, gave."""
    before = plain_text_without_tail_folding(text)
    expected = re.sub(r"\s+", " ", re.sub(r"[*_`~>|]+", " ", before)).strip()
    assert plain_text(text) == expected


def plain_text_without_tail_folding(text: str) -> str:
    for pattern, repl, _ in _MARKUP:
        text = _drop_comments(text, repl) if pattern is None else pattern.sub(repl, text)
    return text


class _HangingModel:
    """An in-process model (third-party code, as far as vault-brain knows) whose query
    embedding never returns: passages embed, queries hang until released."""

    name = "test:hanging"

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()

    def dimension(self) -> int:
        return 4

    def load(self) -> None:
        pass

    def embed(self, texts: list[str]):
        import numpy as np

        return np.tile(np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32), (len(texts), 1))

    def embed_queries(self, texts: list[str]):
        self.release.wait(120)
        return self.embed(texts)


def test_a_model_whose_query_embedding_hangs_costs_a_bounded_wait_then_full_text(vault):
    """Nothing a model does may make a search run unbounded: past the deadline the search
    answers from full text and says why."""
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    for rel, text in NOTES.items():
        vault.write(rel, text)
    settings = load_settings(vault=str(vault.root), env={}, overrides={"embed": {"strong": "none"}})
    model = _HangingModel()
    with Brain(settings, embedder=model) as brain:
        brain.sync()
        brain.embed_pending()
        try:
            result = brain.search("deploy to production")
        finally:
            model.release.set()
    assert result.degraded and "slow" in (result.reason or "")
    assert result.hits[0].path == "How-to/Deploy.md"
