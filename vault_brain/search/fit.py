"""The vault calibrates itself: how high a note's cosine must be before it counts as an
answer is measured on this vault, with this model, on this CPU, in the question's language.

A bank of questions no vault is about in particular (search/data/background.tsv: everyday
life, trivia, money, health, 40 a language in 11 languages) is asked of the vault once its
vectors are in; the best cosine each gets is what "no relation" reaches here. Measured on
the evaluation sets (docs/benchmarks.md): a fixed cosine floor empties right answers on small
and cross-language vaults and lets off-topic questions through on others, because what
unrelated text scores depends on the vault (its size, its topics), the model and the
question's language (a Korean question about English notes scores lower, right or wrong).

On a small vault what is kept is not a question's raw cosine but its cosine less a share
of its likeness to the nearest bank question (calibration.bank_adjusted): on a vault of a
few everyday notes, off-topic questions reach the cosines that colloquial right answers
get, but they are also nearer some everyday question of the bank than right answers are
(measured on the evaluation sets, docs/benchmarks.md). A bank question's own likeness is
to the bank without itself and its translations.

The fit keeps the bank's adjusted scores, not a threshold: search/calibration.py turns them
into the floor of a question's language at search time. It is redone when the vault has
grown or shrunk by a tenth or the model changed (Fit.due); a stored fit of an older KIND
reads as none, so the model's declared scale answers until the next fit."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vault_brain.embed.base import Embedder, embed_queries
from vault_brain.index.port import Index, Meta
from vault_brain.search.calibration import bank_adjusted, fitted_floor
from vault_brain.text.analysis import script_of_language

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.embed.e5 import Cache

BANK_FILE = Path(__file__).parent / "data" / "background.tsv"
REFIT_SHARE = 0.1  # a tenth more or fewer notes than at the fit: fit again
REFIT_MIN_NOTES = 5
# A tier whose vectors cover this share of the chunks covers the vault (the strong tier
# then answers alone, search/semantic.STRONG_TAKEOVER; a fit made before it is redone).
FULL_COVERAGE = 0.99
# A fit made on part of a tier's vectors is made again each time they cover this much more
# of the chunks: more chunks reach higher cosines, so a floor fitted on fewer lets off-topic
# questions through (measured on Obsidian de: a fit of the leads, 23 % of the chunks,
# caught 9 of 12 plain off-topic questions at 60 % against 12 of 12 when fitted again).
REFIT_COVERAGE = 0.1
# What a fit's scores are: "bank-adjusted-1" = cosine less bank_weight(notes) x likeness to
# the bank. A stored fit of another kind (raw cosines, before) is not used; it is refitted.
KIND = "bank-adjusted-1"


def meta_key(tier: str) -> str:
    return f"calibration:{tier}"


def load_bank(path: Path = BANK_FILE) -> dict[str, list[str]]:
    """language -> questions, from the shipped bank."""
    bank: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        lang, _, question = line.partition("\t")
        if question.strip():
            bank.setdefault(lang.strip(), []).append(question.strip())
    return bank


@dataclass(frozen=True)
class Fit:
    """One tier's calibration on one vault: the bank's best cosines per language."""

    model: str
    notes: int
    tops: dict[str, tuple[float, ...]]
    fitted_at: float = field(default_factory=time.time)
    # The share of the vault's chunks the tier had vectors for: under FULL_COVERAGE, a fit
    # of the strong tier made once every note's lead was in (the Indexer), done again at
    # full coverage. A fit stored before this field existed was made at full coverage.
    coverage: float = 1.0

    def floor(self, lang: str) -> float:
        """The cosine a question in `lang` must reach here: from the bank's questions in
        that language; else from those in the languages of its script (the median of their
        floors); else from every language's."""
        if lang in self.tops:
            return fitted_floor(self.tops[lang], self.notes)
        script = script_of_language(lang)
        same = [k for k in self.tops if script_of_language(k) == script] or list(self.tops)
        import statistics  # (and fractions, decimal): only for a language the bank lacks

        return statistics.median(fitted_floor(self.tops[k], self.notes) for k in same)

    def due(self, model: str, notes: int, coverage: float = 1.0) -> bool:
        """A new fit is needed: another model, the vault changed size by a tenth, or the
        fit was made on part of the vectors and they now cover REFIT_COVERAGE more of the
        chunks, or the whole vault."""
        if model != self.model:
            return True
        if self.coverage < FULL_COVERAGE and (
            coverage >= FULL_COVERAGE or coverage - self.coverage >= REFIT_COVERAGE - 1e-9
        ):
            return True
        change = abs(notes - self.notes)
        return change >= REFIT_MIN_NOTES and change >= REFIT_SHARE * max(self.notes, 1)

    def to_json(self) -> str:
        return json.dumps(
            {
                "model": self.model,
                "notes": self.notes,
                "fitted_at": round(self.fitted_at, 3),
                "kind": KIND,
                "coverage": round(self.coverage, 4),
                "tops": {k: [round(x, 5) for x in v] for k, v in sorted(self.tops.items())},
            }
        )

    @classmethod
    def from_json(cls, raw: str | None) -> Fit | None:
        if not raw:
            return None
        try:
            data = json.loads(raw)
            if data.get("kind") != KIND:
                return None  # measured another way: fitted again, meanwhile not used
            tops = {str(k): tuple(sorted(float(x) for x in v)) for k, v in data["tops"].items()}
            coverage = float(data.get("coverage", 1.0))
            return cls(
                str(data["model"]), int(data["notes"]), tops, float(data["fitted_at"]), coverage
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def fit_tier(index: Index, embedder: Embedder, tier: str, cache: Cache | None = None) -> Fit | None:
    """Ask the bank of the vault's `tier` vectors (embedded by `embedder`): the best
    cosine of each question, per language. None when the tier holds no vectors of this
    model (nothing to measure yet). The questions are embedded outside any read, once per
    model on this machine when a `cache` (embed/cache.py) keeps their vectors."""
    bank = load_bank()
    with index.read() as r:
        held = r.vectors_model(tier)
        counts = r.counts()
    notes = counts.notes
    if held is None or held[0] != embedder.name or notes == 0:
        return None
    done = counts.vectors if tier == "instant" else counts.strong_vectors
    coverage = done / counts.chunks if counts.chunks else 1.0
    questions = [q for qs in bank.values() for q in qs]
    vectors = _bank_vectors(embedder, questions, cache)
    likeness = _likeness_to_the_rest(vectors, [i for qs in bank.values() for i in range(len(qs))])
    # A model that knows none of a question's words gives it no vector: no cosine to learn.
    asked = [i for i in range(len(vectors)) if vectors[i].any()]
    with index.read() as r:
        # All the questions in one search: the answers of one search each, to the bit.
        nearest = r.nearest_chunk_each(embedder.name, vectors[asked], tier=tier)
    found = dict(zip(asked, nearest, strict=True))
    tops: dict[str, list[float]] = {}
    at = 0
    for lang, qs in bank.items():
        for i in range(at, at + len(qs)):
            hit = found.get(i)
            if hit is not None:
                adjusted = bank_adjusted(hit.score, float(likeness[i]), notes)
                tops.setdefault(lang, []).append(adjusted)
        at += len(qs)
    if not tops:
        return None
    return Fit(
        embedder.name, notes, {k: tuple(sorted(v)) for k, v in tops.items()}, coverage=coverage
    )


def _likeness_to_the_rest(vectors: np.ndarray, positions: list[int]) -> np.ndarray:
    """Each bank question's cosine to the nearest other question of the bank, leaving out
    the questions at its position in every language (the bank's languages ask the same
    questions, translated)."""
    import numpy as np

    same = np.asarray(positions)
    sims = vectors @ vectors.T
    sims[same[:, None] == same[None, :]] = -1.0
    return sims.max(axis=1)


class KeptBank(NamedTuple):
    """The bank's vectors as the cache keeps them (float32 rows, C order), read without
    numpy: a one-shot search's forked child on a small vault then imports none."""

    data: bytes
    rows: int
    width: int


def bank_likeness(bank: np.ndarray | KeptBank, vector: Any) -> float:
    """A question's cosine to the nearest question of the bank (0 for an empty bank). Where
    the C module is built, each product in its fixed order (the KNN's: the same likeness in
    a one-shot child and a resident), else numpy's."""
    rows = bank.rows if isinstance(bank, KeptBank) else bank.shape[0]
    if rows == 0:
        return 0.0
    module = native()
    if module is None:
        return float((bank @ vector).max())  # type: ignore[operator]
    if isinstance(bank, KeptBank):
        data, width = bank.data, bank.width
    else:
        import numpy as np

        data, width = np.ascontiguousarray(bank, dtype=np.float32), bank.shape[1]
    out = bytearray(4 * rows)
    module.products(data, width, _float32(vector), out)
    return float(max(memoryview(out).cast("f")))


def bank_matrix(embedder: Embedder, cache: Cache | None) -> np.ndarray | KeptBank:
    """The shipped bank's vectors by this model (from the cache when it holds them: read
    without numpy where the C module is built)."""
    questions = [q for qs in load_bank().values() for q in qs]
    if native() is not None and cache is not None:
        found = cache.find(_bank_name(embedder, questions))
        kept = _read_kept_bank(found, len(questions)) if found is not None else None
        if kept is not None:
            return kept
    return _bank_vectors(embedder, questions, cache)


def _bank_name(embedder: Embedder, questions: list[str]) -> str:
    key = hashlib.sha256("\n".join([embedder.name, *questions]).encode()).hexdigest()[:16]
    return f"bank-{key}.npy"


def _read_kept_bank(path: Path, rows: int) -> KeptBank | None:
    """A kept bank file (numpy's .npy, as _bank_vectors saves it: version 1-3, '<f4',
    C order, `rows` rows) read without numpy; None for anything else (numpy reads it)."""
    try:
        raw = path.read_bytes()
        if raw[:6] != b"\x93NUMPY" or raw[6] not in (1, 2, 3):
            return None
        size, start = (
            (int.from_bytes(raw[8:10], "little"), 10)
            if raw[6] == 1
            else (int.from_bytes(raw[8:12], "little"), 12)
        )
        header = ast.literal_eval(raw[start : start + size].decode("latin1"))
        shape = header["shape"]
        if header["descr"] != "<f4" or header["fortran_order"] or len(shape) != 2:
            return None
        data = raw[start + size :]
        if shape[0] != rows or len(data) != 4 * shape[0] * shape[1]:
            return None
        return KeptBank(data, shape[0], shape[1])
    except (OSError, ValueError, SyntaxError, KeyError, TypeError, IndexError):
        return None


def native() -> Any:
    """The C module where it is built (imported here, not with this module: a full-text
    search never asks)."""
    from vault_brain.embed.e5_native import native as module

    return module()


def _float32(vector: Any) -> Any:
    if isinstance(vector, array) and vector.typecode == "f":
        return vector
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32)


def _bank_vectors(embedder: Embedder, questions: list[str], cache: Cache | None) -> np.ndarray:
    """The bank's query vectors by this model: from the cache when it holds them (the
    same model and the same questions), else embedded and kept there."""
    import numpy as np

    name = _bank_name(embedder, questions)
    kept = cache.find(name) if cache is not None else None
    if kept is not None:
        try:
            vectors = np.load(kept, allow_pickle=False)
            if vectors.shape[0] == len(questions) and vectors.dtype == np.float32:
                return vectors
        except (OSError, ValueError):
            pass  # a damaged file: embed again
    vectors = np.asarray(embed_queries(embedder, questions), dtype=np.float32)
    if cache is not None:
        out = io.BytesIO()
        np.save(out, vectors, allow_pickle=False)
        cache.keep(name, out.getvalue())
    return vectors


def stored_fit(reads: Meta, tier: str) -> Fit | None:
    """The fit kept in the index for `tier`, remembered until the index changes."""
    return reads.parsed_meta(meta_key(tier), Fit.from_json)
