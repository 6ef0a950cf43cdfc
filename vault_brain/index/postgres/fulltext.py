"""How Postgres answers the full-text question: BM25 computed in SQL, the way SQLite's
FTS5 computes it, over the candidates a GIN index finds.

Words arrive analysed (text/analysis.py: stems, CJK and Thai n-grams, space-separated),
as SQLite's FTS5 gets them; `words()` does what FTS5's unicode61 tokenizer then does
(splits on spaces, removes Latin diacritics), so both stores hold the same words.

BM25 as FTS5's bm25() has it (k1 1.2, b 0.75; a phrase per form of each query word;
idf log((N - n + 0.5) / (n + 0.5)), at least 1e-6; a word's count weighted title 2,
headings 1, body 1; a row's length its words in all columns).

Whole notes, unfiltered: impact-ordered postings. Each posting keeps its word's BM25 part
in its note (`impact_sql`, at the mean note length frozen when it was written), and the
postings are indexed by (word, impact descending), so a query reads each word's
POSTINGS_PER_TERM best notes by one index range scan, whatever the vault's size; the notes
are ranked by what those add up to and the best of them scored exactly. Exact for every
word held by at most that many notes; a commoner word (whose idf is low) counts only in
the notes where it weighs most. Within filters, exact: the rarest forms are asked first
(MaxScore): a note that holds none of them scores at most the sum of the others' bounds
(idf · (k1 + 1)); once the `limit`-th best score so far beats that sum, no note outside
the candidates can enter the top `limit`. Otherwise more forms join, up to all of them.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

K1, B = 1.2, 0.75
WEIGHTS = (2.0, 1.0, 1.0)  # title, headings, body: SQLite's FTS_WEIGHTS
TSV_WEIGHTS = ("A", "B", "")  # their tsvector weights (D is written without a letter)
MAX_LEXEME_BYTES = 2000  # a tsvector lexeme holds at most 2 KB
MAX_WORD = 500  # longer "words" (base64, hashes) are counted in a row's length, not kept
MAX_POSITION = 16383
# Candidates the rarest forms may bring before commoner ones join (MaxScore, above).
CANDIDATE_BUDGET = 20_000
PREFIX_TERMS = 200  # words a prefix form ("中*") stands for, the most frequent first
# Impact-ordered postings: a query reads at most this many notes of each of its words, those
# where the word weighs most (its BM25 part at a frozen mean length, `impact_sql`), and
# scores the best of them exactly. Exact for every word held by at most this many notes;
# a commoner word (low idf) adds only to the notes where it weighs most.
POSTINGS_PER_TERM = 1000
MIN_PREFIX_POSTINGS = 50  # each word of a prefix form reads at least this many
RESCORE_FACTOR, RESCORE_MIN = 2, 200  # notes scored exactly: limit x factor, at least min
AVGLEN_META = "note_avglen"  # the mean note length the stored impacts were computed at
AVGLEN_DRIFT = 0.25  # maintain() recomputes the impacts when the mean moved by more


def impact_sql(w: str, length: str, avglen: str) -> str:
    """SQL for a word's BM25 part in a row (its count w, the row's length) at mean length
    `avglen`: what idf multiplies."""
    return (  # float8 throughout: a bare 0.75 is numeric, and numeric arithmetic is slow
        f"({w})::float8 * {K1 + 1}::float8 / (({w})::float8 + {K1}::float8 * ({1 - B}::float8 "
        f"+ {B}::float8 * ({length})::float8 / ({avglen})::float8))"
    )


def _latin(ch: str) -> bool:
    return ch < "\u0250" or "\u1e00" <= ch <= "\u1eff"


@lru_cache(maxsize=200_000)
def fold(word: str) -> str:
    """A word as FTS5's unicode61 tokenizer (remove_diacritics 2) keeps it: diacritics
    gone from Latin letters, every other script untouched."""
    if word.isascii():
        return word
    out = []
    for ch in word:
        if ch < "\u00c0" or not _latin(ch):
            out.append(ch)
            continue
        base = unicodedata.normalize("NFD", ch)
        out.append("".join(c for c in base if not unicodedata.combining(c)) or ch)
    return "".join(out)


def words(text: str) -> list[str]:
    return [fold(w) for w in text.split()]


@dataclass(frozen=True)
class TextRow:
    """One note's or chunk's full text as stored: its tsvector literal, weighted counts,
    length in words."""

    tsv: str
    tf: dict[str, float]
    length: int


def text_row(title: str, headings: str, body: str) -> TextRow:
    tf: dict[str, float] = {}
    positions: dict[str, list[str]] = {}
    pos = 0
    length = 0
    for column, weight, letter in zip((title, headings, body), WEIGHTS, TSV_WEIGHTS, strict=True):
        seen: set[str] = set()
        for word in words(column):
            pos += 1
            length += 1
            if len(word) > MAX_WORD:
                continue  # a blob, not a word: b-tree keys hold at most ~2.7 KB
            tf[word] = tf.get(word, 0.0) + weight
            if word not in seen:
                seen.add(word)
                positions.setdefault(word, []).append(f"{min(pos, MAX_POSITION)}{letter}")
    parts = [
        f"'{_escape(w)}':{','.join(p)}"
        for w, p in positions.items()
        if len(w.encode("utf-8", "surrogatepass")) <= MAX_LEXEME_BYTES
    ]
    return TextRow(" ".join(parts), tf, length)


def _escape(word: str) -> str:
    return word.replace("\\", "\\\\").replace("'", "''")


def tsquery(forms: Iterable[str]) -> str:
    """A tsquery literal matching any of the forms (a trailing * is a prefix)."""
    parts = []
    for form in forms:
        if form.endswith("*"):
            parts.append(f"'{_escape(fold(form.rstrip('*')))}':*")
        else:
            parts.append(f"'{_escape(fold(form))}'")
    return " | ".join(parts) or "''"


def idf(rows: int, df: int) -> float:
    value = math.log((rows - df + 0.5) / (df + 0.5)) if rows else 0.0
    return value if value > 0 else 1e-6


@dataclass(frozen=True)
class Phrase:
    """One form of one query word, as FTS5 counts it: its words (a prefix form: every
    word it starts), how many rows hold it, its idf."""

    form: str
    terms: tuple[str, ...]
    prefix: bool
    df: int
    idf: float

    @property
    def bound(self) -> float:
        """The most this phrase adds to any row's score."""
        return self.idf * (K1 + 1)


def term_deltas(tf: dict[str, float]) -> Counter[str]:
    return Counter(dict.fromkeys(tf, 1))


def scoring_arrays(phrases: Sequence[Phrase]) -> tuple[list[str], list[float], list[int]]:
    """(word, idf, phrase number) rows: a prefix phrase's words share its number, so its
    count is their sum."""
    terms: list[str] = []
    idfs: list[float] = []
    ids: list[int] = []
    for i, p in enumerate(phrases):
        for t in p.terms:
            terms.append(t)
            idfs.append(p.idf)
            ids.append(i)
    return terms, idfs, ids


def essential_rounds(phrases: Sequence[Phrase]) -> list[tuple[list[int], float]]:
    """The MaxScore rounds: (phrases whose holders are the candidates, the bound of the
    rest), rarest phrases first, growing until every phrase is in."""
    order = sorted(range(len(phrases)), key=lambda i: (phrases[i].df, i))
    rounds: list[tuple[list[int], float]] = []
    budget = CANDIDATE_BUDGET
    taken = 0
    while taken < len(order):
        size = 0
        start = taken
        while taken < len(order) and (taken == start or size + phrases[order[taken]].df <= budget):
            size += phrases[order[taken]].df
            taken += 1
        rest = sum(phrases[i].bound for i in order[taken:])
        rounds.append((order[:taken], rest))
        budget *= 4
    return rounds
