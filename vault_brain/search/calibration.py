"""Scores that mean the same thing from query to query and mode to mode: each arm's raw
evidence mapped onto [0, 1] against what "no relation" looks like, so a cut-off can say
"nothing relevant" (search.min_score) and a model can compare scores across searches.

- Full text: the share of the question's information its words carry that a note holds
  (each word weighted by its idf over the vault's notes), shaded by the note's full-text
  score within the query (the store's rank_text; SQLite's mixes bm25s). A note holding
  every rare word of the question scores near 1; one holding only common words scores
  near 0, however many notes match them.
  Questions a vault cannot answer still share a few words with it (measured: coverage up
  to 0.57; TEXT_FLOOR 0.6 rather than 0.5 caught 2 more of 40 plain off-topic questions
  on Obsidian fr + ja and emptied no answer on any set), and real answers often hold
  fewer: words alone cannot tell them apart. So
  when a vector arm with a measured scale answered too, coverage below TEXT_FLOOR is not
  evidence (the vectors decide); when full text is alone, only TEXT_FLOOR_ALONE is, so
  real answers stay (nonsense matches no word at all and still returns nothing).
- Vectors: what an unrelated note's cosine reaches depends on the vault (its size and
  topics), the model, the CPU's kernel and the question's language (a Korean question about
  English notes scores lower, right or wrong). So the vault calibrates itself
  (search/fit.py): a bank of everyday questions no vault is about is asked of it, and a
  question's best note must beat what those reach in its language: the bank's 90th
  percentile plus FLOOR_MARGIN on vaults of LARGE_NOTES notes or more; its median on vaults
  of SMALL_NOTES or fewer, whose few notes, often on everyday topics, give right answers to
  colloquial questions no higher cosines than everyday questions get (measured: 0.79-0.85
  against 0.76-0.84); in between, the two blend by the log of the note count. The floor is
  where evidence reaches LOW (the lowest confidence); VECTOR_SPAN further it reaches 1.
  Before a vault has a fit, a model's declared `cosine_scale = (floor, span)` stands in
  (e5's and the instant model's were measured on the team's vaults). For any other model
  with neither, the cosine is measured against the query's own noise (the median and
  robust spread of its cosines over every chunk): evidence starts one spread above the
  median.

Confidence: a calibrated score of HIGH or more is "high", MEDIUM "medium", LOW "low"; a hit
under LOW is not returned by default (search.min_score), and a reply with none says
`nothing_relevant`.

The constants are chosen by measurement (bench/quality.py's cut-off tables,
docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set

# Full text: how much a note's text score within the query shades its coverage (0: none),
# and the coverage at which evidence starts and the span over which it reaches 1.
RANK_SHADE = 0.5
TEXT_FLOOR = 0.6
TEXT_FLOOR_ALONE = 0.05
# Vectors of a model with no scale: evidence rises from 0 at VECTOR_START spreads above
# the median of the query's cosines to 1 at VECTOR_SPAN spreads beyond that.
VECTOR_START = 1.0
VECTOR_SPAN = 4.0
# The confidence levels of a calibrated score (LOW is search.min_score's default).
LOW, MEDIUM, HIGH = 0.15, 0.4, 0.7
# A fitted floor (search/fit.py), chosen on the evaluation sets' dev split, worst case over
# every set (docs/benchmarks.md, "The vault calibrates itself").
SMALL_NOTES, LARGE_NOTES = 16, 128
SMALL_QUANTILE, LARGE_QUANTILE = 0.6, 0.9
SMALL_MARGIN, FLOOR_MARGIN = 0.004, 0.007
FITTED_SPAN = 0.08  # cosine from evidence 0 to 1 around a fitted floor (LOW at the floor)
# With a fit, on a vault of SMALL_NOTES or fewer a hit's cosine counts less this share of
# the question's cosine to the nearest question of the bank (search/fit.py): how much the
# question looks like an everyday one; none from LARGE_NOTES up (it helped there on no set).
SMALL_BANK_WEIGHT = 0.3


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


def confidence(score: float) -> str:
    """The plain word for a calibrated score: "high", "medium", "low", or "none" (under
    the lowest level: shown only when a caller lowers min_score)."""
    if score >= HIGH:
        return "high"
    if score >= MEDIUM:
        return "medium"
    if score >= LOW:
        return "low"
    return "none"


def fitted_floor(tops: Sequence[float], notes: int) -> float:
    """The cosine a question's best note must reach in a vault of `notes` notes, from the
    bank's best cosines there in the question's language (see the module's docstring)."""
    ordered = sorted(tops)
    if not ordered:
        return 1.0
    t = _largeness(notes)
    q = SMALL_QUANTILE + t * (LARGE_QUANTILE - SMALL_QUANTILE)
    return _quantile(ordered, q) + SMALL_MARGIN + t * (FLOOR_MARGIN - SMALL_MARGIN)


def bank_weight(notes: int) -> float:
    """How much of a question's likeness to the bank its cosines lose in a vault of
    `notes` notes: SMALL_BANK_WEIGHT on small vaults, none on large ones, blended."""
    return SMALL_BANK_WEIGHT * (1.0 - _largeness(notes))


def bank_adjusted(cosine: float, likeness: float, notes: int) -> float:
    """A hit's cosine less bank_weight(notes) times the question's likeness to the bank:
    the scale a fit's floor is on."""
    return cosine - bank_weight(notes) * likeness


def _largeness(notes: int) -> float:
    """0 for a vault of SMALL_NOTES or fewer, 1 from LARGE_NOTES up, by the log between."""
    span = math.log(LARGE_NOTES) - math.log(SMALL_NOTES)
    return min(1.0, max(0.0, (math.log(max(notes, 1)) - math.log(SMALL_NOTES)) / span))


def fitted_scale(floor: float) -> tuple[float, float]:
    """(evidence 0 cosine, span) for vector_evidence, so that the floor gives LOW."""
    return floor - LOW * FITTED_SPAN, FITTED_SPAN


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, linear between neighbours (numpy's default)."""
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
