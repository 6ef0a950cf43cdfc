"""The port's `related` question (index/port.py, Lookup.related) on every backend: link
neighbours first (out in link order, then back by path), then the nearest notes by vector,
never the note itself nor a note twice, at most `limit`."""

from __future__ import annotations

from tests.conftest import every_backend
from vault_brain.index.records import INSTANT, STRONG

backend = every_backend()


def related_paths(brain, path: str, limit: int = 5, tiers=(STRONG, INSTANT)) -> list[str]:
    with brain.index.read() as r:
        info = r.note_by_path(path)
        return [n.path for n in r.related(info.rowid, limit, tiers)]


def write_notes(vault) -> None:
    vault.write("a.md", "# A\n\nBread: [[c]], then [[b]], and [[c]] again, and [[a]] itself.\n")
    vault.write("b.md", "# B\n\nGarden tools.\n")
    vault.write("c.md", "# C\n\nMusic scales.\n")
    vault.write("d.md", "# D\n\nSee [[a]].\n")
    vault.write("e.md", "# E\n\nSourdough bread, baked with a starter and rye flour.\n")
    vault.write("f.md", "# F\n\nBread: a sourdough loaf from a starter.\n")
    vault.write("g.md", "# G\n\nTax forms.\n")


def test_links_out_in_order_then_back_then_nearest_by_vector(vault, make_brain):
    write_notes(vault)
    brain = make_brain(embed={"provider": "local"})
    got = related_paths(brain, "a.md")
    assert got[:3] == ["c.md", "b.md", "d.md"]
    assert len(got) == 5 and len(set(got)) == 5 and "a.md" not in got
    assert set(got[3:]) == {"e.md", "f.md"}  # the two bread notes are its nearest
    assert related_paths(brain, "a.md", limit=2) == ["c.md", "b.md"]
    assert related_paths(brain, "a.md", limit=0) == []


def test_without_vectors_in_the_tiers_asked_only_links_answer(vault, make_brain):
    write_notes(vault)
    brain = make_brain()  # no embedding model: no vectors at all
    assert related_paths(brain, "a.md") == ["c.md", "b.md", "d.md"]
    assert related_paths(brain, "g.md") == []
    with_vectors = make_brain(embed={"provider": "local"})
    assert related_paths(with_vectors, "a.md", tiers=()) == ["c.md", "b.md", "d.md"]


def test_a_note_asked_while_the_tier_holds_no_vectors_at_all_gets_its_links(vault, make_brain):
    vault.write("old.md", "# Old\n\nSome words.\n")
    brain = make_brain(embed={"provider": "local"})
    assert related_paths(brain, "old.md", tiers=(INSTANT,)) == []  # alone in the vault
    vault.remove("old.md")
    vault.write("new.md", "# New\n\nSee [[other]].\n")
    vault.write("other.md", "# Other\n\nMore words.\n")
    brain.sync()  # the new notes' vectors are not computed yet: the tier holds none
    assert related_paths(brain, "new.md", tiers=(INSTANT,)) == ["other.md"]
