"""The in-memory vector matrix: its answers are numpy's exact ones, only cheaper to get."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vault_brain.index.matrix import _median, _noise

cosines = arrays(
    np.float32,
    st.integers(1, 400),
    elements=st.floats(-1, 1, width=32),  # ties come often from so few distinct draws
)


@given(cosines)
@settings(max_examples=300)
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
