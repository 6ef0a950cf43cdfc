"""The index behind its port (index/port.py): every backend fills every role the port
names, the factory opens the backend `index.url` names, and Brain takes an index the way
httpx's Client takes a transport."""

from __future__ import annotations

import inspect
from contextlib import closing

import pytest

from tests.conftest import every_backend
from vault_brain.config import load_settings
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.index import port
from vault_brain.index.factory import open_index
from vault_brain.index.records import Filters
from vault_brain.search.fulltext import text_query
from vault_brain.service import Brain

backend = every_backend()

READ_ROLES = [
    port.Meta,
    port.SyncReads,
    port.TextSearch,
    port.VectorSearch,
    port.Hydration,
    port.VectorQueueReads,
    port.SummaryReads,
    port.Lookup,
    port.Reads,
]
WRITE_ROLES = [
    *READ_ROLES,
    port.MetaWrites,
    port.SyncWrites,
    port.VectorQueueWrites,
    port.SummaryWrites,
    port.Writes,
]


def members(protocol: type) -> dict[str, object]:
    """What a protocol asks for (its own and its bases'), by name."""
    found: dict[str, object] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or not getattr(cls, "_is_protocol", False):
            continue
        for name, value in vars(cls).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, property)):
                found[name] = value
    return found


def assert_fills(obj: object, protocol: type) -> None:
    """obj has every member of the protocol, methods with the same parameters (names,
    kinds, which have defaults): a backend answers the port's questions as they are asked."""
    for name, wanted in members(protocol).items():
        assert hasattr(obj, name), f"{type(obj).__name__} lacks {protocol.__name__}.{name}"
        if isinstance(wanted, property):
            continue
        have = inspect.signature(getattr(obj, name)).parameters
        want = list(inspect.signature(wanted).parameters.values())[1:]  # without self
        shape = [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in want]
        got = [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in have.values()]
        assert got == shape, f"{type(obj).__name__}.{name}{inspect.signature(getattr(obj, name))}"


def test_every_backend_fills_every_role_of_the_port(make_settings):
    with closing(open_index(make_settings())) as index:
        assert_fills(index, port.Index)
        assert_fills(index.indexer_lock, port.RoleLock)
        with index.read() as reads:
            for role in READ_ROLES:
                assert_fills(reads, role)
        with index.transaction() as writes:
            for role in WRITE_ROLES:
                assert_fills(writes, role)


def test_brain_takes_the_index_it_is_given_and_closes_it(vault, make_settings, index_settings):
    vault.write("a.md", "# A\n\nwombat\n")
    given = open_index(make_settings(index=index_settings("given")))
    brain = Brain(make_settings(), index=given)
    try:
        brain.sync()
        assert brain.index is given
        assert brain.status().index_path == given.location
        assert [h.path for h in brain.search("wombat", mode="fts").hits] == ["a.md"]
    finally:
        brain.close()
    with pytest.raises(Unavailable):
        with given.read() as r:
            r.has_notes()
    with closing(open_index(make_settings())) as own:  # the vault's own index stayed empty
        with own.read() as r:
            assert not r.has_notes()


def test_a_search_answers_from_one_question_per_arm(vault, make_brain):
    """The full-text arm's one question: notes best first with their best chunk, the word
    groups each holds, and the statistics its calibration weighs them with."""
    vault.write("Kiln.md", "# Kiln\n\nBisque firing at cone 04, then the glaze firing.\n")
    vault.write("Bread.md", "# Bread\n\nSourdough needs a long, cool proof.\n")
    for n in range(6):
        vault.write(f"Other {n}.md", f"# Other {n}\n\nGardening and firing {n}.\n")
    brain = make_brain()
    with brain.index.read() as reads:
        query = text_query(reads, "bisque glaze firing")
        ranking = reads.rank_text(query, Filters(), notes=10, note_weight=0.3, evidence=2)
        chunks = reads.chunk_texts([h.chunk_rowid for h in ranking.hits])
        notes = reads.notes_by_rowids([h.note_rowid for h in ranking.hits])
    assert notes[ranking.hits[0].note_rowid].path == "Kiln.md"
    assert "Bisque" in chunks[ranking.hits[0].chunk_rowid][1]
    assert ranking.hits[0].matched == {0, 1, 2}  # bisque, glaze, firing
    assert all(h.matched == {2} for h in ranking.hits[1:2])  # firing alone
    assert all(h.matched == frozenset() for h in ranking.hits[2:])  # past `evidence`
    assert ranking.notes == 8
    assert ranking.doc_freq == (1, 1, 7)
    assert [h.score for h in ranking.hits] == sorted((h.score for h in ranking.hits), reverse=True)


# --- which backend opens ---------------------------------------------------------------------


def test_chunk_keys_are_a_notes_chunks_in_order(vault, make_brain):
    sections = "".join(f"\n## Part {k}\n\n" + f"numbat {k} words " * 400 for k in range(3))
    vault.write("Long.md", f"# Long\n{sections}")
    vault.write("Short.md", "# Short\n\nOne chunk.\n")
    brain = make_brain()
    with brain.index.transaction() as w:
        long, short = w.load_stat("Long.md"), w.load_stat("Short.md")
        assert long is not None and short is not None
        keys = w.chunk_keys(long.rowid)
        pending = [p.rowid for p in w.pending_chunks(100)]  # no vectors: all pending
        assert len(keys) >= 3 and keys == [k for k in pending if k in keys] == sorted(keys)
        assert len(w.chunk_keys(short.rowid)) == 1 and not set(keys) & set(
            w.chunk_keys(short.rowid)
        )
        assert w.chunk_keys(10**9) == []


def test_index_url_names_the_index_file(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    where = tmp_path / "elsewhere" / "brain.db"
    settings = load_settings(vault=str(vault), env={"VAULT_BRAIN_INDEX_URL": str(where)})
    with Brain(settings) as brain:
        assert brain.status().index_path == str(where)
    assert where.is_file()
    assert not (vault / ".vault-brain" / "index.db").exists()


def test_index_url_wins_over_index_path(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    url, path = tmp_path / "url.db", tmp_path / "path.db"
    overrides = {"index": {"url": str(url), "path": str(path)}}
    settings = load_settings(vault=str(vault), env={}, overrides=overrides)
    assert settings.index_location == str(url) and settings.index_path == url
    with Brain(settings):
        pass
    assert url.is_file() and not path.exists()


def test_a_server_url_no_backend_opens_is_a_configuration_error(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    overrides = {"index": {"url": "nosuchdb://team-host/brain"}}
    settings = load_settings(vault=str(vault), env={}, overrides=overrides)
    assert settings.index_path is None
    with pytest.raises(ConfigError, match=r"index\.url.*nosuchdb://"):
        Brain(settings)
    assert not (vault / ".vault-brain" / "index.db").exists()
