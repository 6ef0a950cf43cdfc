"""The in-memory vector matrix: its answers are numpy's exact ones, only cheaper to get;
and a one-shot process, which never builds it, answers the same from sqlite-vec."""

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vault_brain.config import load_settings
from vault_brain.index.sqlite.matrix import _median, _noise
from vault_brain.service import Brain


def settings_for(vault: Path, **sections: dict):
    sections.setdefault("embed", {"provider": "none"})
    return load_settings(vault=str(vault), env={}, overrides=sections)


cosines = arrays(
    np.float32,
    st.integers(1, 400),
    elements=st.floats(-1, 1, width=32),  # ties come often from so few distinct draws
)


@given(cosines)
@settings(max_examples=300, deadline=None)
def test_the_median_is_numpys_for_odd_and_even_counts_and_ties(values):
    assert _median(values) == float(np.median(values))


def test_the_noise_of_a_query_is_the_median_and_the_scaled_mad():
    rng = np.random.default_rng(7)
    for size in (34_252, 34_251):  # cpp-docs' chunk count, and one odd
        scores = rng.normal(0.3, 0.08, size).astype(np.float32)
        median = float(np.median(scores))
        mad = float(np.median(np.abs(scores - median)))
        assert _noise(scores) == (median, 1.4826 * mad)


def test_no_cosines_have_no_noise():
    assert _noise(np.empty(0, dtype=np.float32)) == (0.0, 0.0)


def test_a_one_shot_search_answers_as_the_server_does_without_loading_vectors(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    topics = ["kiln firing pottery", "sourdough bread baking", "tax filing deadline", "bees"]
    for n in range(60):
        topic = topics[n % len(topics)]
        (vault / f"Note {n}.md").write_text(
            f"---\ntags: [t{n % 3}]\n---\n# {topic} {n}\n\nNotes about {topic}, part {n}.\n",
            encoding="utf-8",
        )
    embed = {"provider": "local", "strong": "none"}
    server = Brain(settings_for(vault, embed=embed))
    server.sync()
    server.embed_pending()
    one_shot = Brain(settings_for(vault, embed=embed), one_shot=True)
    try:
        for query, tags in [("firing a kiln", None), ("bread", ["t1"]), ("deadline", None)]:
            for mode in ("vector", "hybrid"):
                a = server.search(query, mode=mode, tags=tags, limit=8, min_score=0.0)
                b = one_shot.search(query, mode=mode, tags=tags, limit=8, min_score=0.0)
                # The same cosines to the bit: the one-shot scan is the matrix's arithmetic.
                assert [(h.path, h.score) for h in a.hits] == [(h.path, h.score) for h in b.hits], (
                    query,
                    mode,
                )
                assert a.hits
        assert server.index.vectors_in_memory() > 0
        assert one_shot.index.vectors_in_memory() == 0
    finally:
        server.close()
        one_shot.close()
