"""Scores that mean the same thing from query to query and mode to mode: each arm's raw
evidence mapped onto [0, 1] against what "no relation" looks like, so a cut-off can say
"nothing relevant" (search.min_score) and a model can compare scores across searches.

- Full text: the share of the question's information its words carry that a note holds
  (each word weighted by its idf over the vault's notes), shaded by the note's full-text
  score within the query (the store's rank_text; SQLite's mixes bm25s). A note holding
  every rare word of the question scores near 1; one holding only common words scores
  near 0, however many notes match them.
  Questions a vault cannot answer still share a few words with it (measured: coverage up
  to 0.57), and real answers often hold fewer: words alone cannot tell them apart. So
  when a vector arm with a measured scale answered too, coverage below TEXT_FLOOR is not
  evidence (the vectors decide); when full text is alone, only TEXT_FLOOR_ALONE is, so
  real answers stay (nonsense matches no word at all and still returns nothing).
- Vectors: a cosine means something only for a model whose range was measured: for e5
  (the strong tier) a query's cosine with an unrelated note stays under 0.845 (off-topic
  and nonsense questions in four languages), while the best note of a real question
  scores 0.85-0.95; such a model declares `cosine_scale = (floor, span)` (the instant
  static model declares one too, measured less widely). For any other model the cosine
  is measured against the query's own noise (the median and robust spread of its cosines
  over every chunk): evidence starts one spread above the median.

The constants are chosen by measurement (bench/quality.py's cut-off tables,
docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set

# Full text: how much a note's text score within the query shades its coverage (0: none),
# and the coverage at which evidence starts and the span over which it reaches 1.
RANK_SHADE = 0.5
TEXT_FLOOR = 0.5
TEXT_FLOOR_ALONE = 0.05
# Vectors of a model with no scale: evidence rises from 0 at VECTOR_START spreads above
# the median of the query's cosines to 1 at VECTOR_SPAN spreads beyond that.
VECTOR_START = 1.0
VECTOR_SPAN = 4.0


def idf_weights(notes: int, counts: Sequence[int]) -> list[float]:
    """A weight per query word from how many notes hold it (BM25's idf, kept positive)."""
    n = max(notes, 1)
    return [math.log(1.0 + (n - df + 0.5) / (df + 0.5)) for df in counts]


def text_coverage(matched: Set[int], weights: Sequence[float], relative: float) -> float:
    """The idf share of the question a note holds, shaded by its `relative` text score (1 for
    the best note of the query, less for the rest)."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    coverage = sum(weights[i] for i in matched if i < len(weights)) / total
    return coverage * (1.0 - RANK_SHADE + RANK_SHADE * max(0.0, min(1.0, relative)))


def text_evidence(coverage: float, *, vectors_decide: bool) -> float:
    """Full-text evidence in [0, 1] from a note's coverage (see the module's docstring)."""
    floor = TEXT_FLOOR if vectors_decide else TEXT_FLOOR_ALONE
    return max(0.0, min(1.0, (coverage - floor) / (1.0 - floor)))


def vector_evidence(
    cosine: float, median: float, spread: float, scale: tuple[float, float] | None = None
) -> float:
    """A hit's vector evidence in [0, 1]: on the model's measured cosine `scale` (floor,
    span) when it has one, else against the query's noise (0 without noise stats: a vault
    too small to know what unrelated looks like gives no vector confidence)."""
    if scale is not None:
        floor, span = scale
        return max(0.0, min(1.0, (cosine - floor) / span))
    if spread <= 1e-9:
        return 0.0
    z = (cosine - median) / spread
    return max(0.0, min(1.0, (z - VECTOR_START) / VECTOR_SPAN))
