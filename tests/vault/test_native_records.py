"""Frozen dataclass instances made in C (vault_brain/native/_records.c) against the class's
own __init__: equal, the same repr, the same attributes in the same order, the same pickle,
still frozen. Skipped where the extension was not built."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, dataclass
from itertools import starmap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.vault.blocks import Heading, many
from vault_brain.vault.links import Link

native = pytest.importorskip(
    "vault_brain.native._records", reason="the C extension is not built (pip install -e .)"
)

_TEXT = st.text(max_size=12)
_OPT = st.one_of(st.none(), _TEXT)


def _same(made: list, expected: list) -> None:
    assert made == expected
    assert repr(made) == repr(expected)
    assert [list(vars(x).items()) for x in made] == [list(vars(x).items()) for x in expected]
    assert pickle.dumps(made) == pickle.dumps(expected)
    assert [hash(x) for x in made] == [hash(x) for x in expected]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(), st.integers(1, 6), _TEXT), max_size=20))
def test_headings_are_the_init_ones(rows: list[tuple]) -> None:
    _same(many(Heading)(rows), list(starmap(Heading, rows)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXT, _OPT, _OPT, st.booleans()), max_size=20))
def test_links_are_the_init_ones(rows: list[tuple]) -> None:
    _same(many(Link)(rows), list(starmap(Link, rows)))


def test_they_stay_frozen() -> None:
    (heading,) = native.instances(Heading, ("start", "level", "text"), [(1, 2, "x")])
    with pytest.raises(FrozenInstanceError):
        heading.level = 3  # type: ignore[misc]


def test_a_class_with_more_to_its_init_gets_its_init() -> None:
    @dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    with pytest.raises(ValueError, match="negative"):
        many(Checked)([(1,), (-1,)])


def test_rows_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(TypeError):
        native.instances(Heading, ("start", "level", "text"), [(1, 2)])
    with pytest.raises(TypeError):
        native.instances(Heading, ("start", "level", "text"), [[1, 2, "x"]])
