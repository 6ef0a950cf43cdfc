"""The strong tier's backlog embeds every note's lead chunk first (issue 23): the first chunk
of a note holds its title and opening lines, so with the leads embedded the multilingual arm
can name most notes long before it covers every chunk. Then the rest, newest first; nothing
twice; an edit mid-backlog queues the note's new chunks, its new lead among the leads.

The strong tier here is the bundled instant model in the strong tier's place: a real model,
fast enough for the default suite (the order does not depend on which model embeds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.conftest import every_backend
from vault_brain.config import EmbedSettings
from vault_brain.embed import make_embedder
from vault_brain.index.factory import open_index
from vault_brain.index.records import STRONG, LeadsFirst
from vault_brain.indexer import Indexer

backend = every_backend()

SECTIONS = 4  # sections per note after its opening: several chunks each note
NOTES = 12


def note_text(i: int, edit: str = "") -> str:
    parts = [f"# Note {i:02d}\n\nThe opening lines of note {i:02d}{edit}, its lead.\n"]
    for s in range(SECTIONS):
        words = " ".join(f"word{i}x{s}x{w}" for w in range(8))
        parts.append(f"## Section {s}\n\n{words}\n")
    return "\n".join(parts)


class StrongQueue:
    """An index of the vault and an Indexer with a strong tier, batch by batch."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.index = indexer.index

    def pending(self) -> set[int]:
        with self.index.read() as r:
            return {p.rowid for p in r.pending_chunks(10**6, STRONG)}

    def leads(self) -> set[int]:
        """Each note's first chunk, as the index holds the notes now."""
        with self.index.read() as r:
            rowids = [info.rowid for _, info in sorted(self._notes(r).items())]
        with self.index.transaction() as w:  # chunk_keys is a sync read, on the writer
            return {w.chunk_keys(rowid)[0] for rowid in rowids}

    def lead_of(self, path: str) -> int:
        with self.index.read() as r:
            rowid = r.note_by_path(path).rowid
        with self.index.transaction() as w:
            return w.chunk_keys(rowid)[0]

    def chunks(self) -> set[int]:
        with self.index.read() as r:
            rowids = [info.rowid for info in self._notes(r).values()]
        with self.index.transaction() as w:
            return {key for rowid in rowids for key in w.chunk_keys(rowid)}

    def _notes(self, r) -> dict:
        return {
            f"n{i:02d}.md": r.note_by_path(f"n{i:02d}.md")
            for i in range(NOTES)
            if r.note_by_path(f"n{i:02d}.md") is not None
        }

    def batch(self, size: int) -> tuple[int, set[int]]:
        """Embed up to `size` strong vectors as the backlog does; (written, which chunks)."""
        before = self.pending()
        written = self.indexer.embed_pending(limit=0, strong_limit=size)
        return written, before - self.pending()

    def coverage(self) -> tuple[int, int]:
        return self.indexer.strong_coverage()


@pytest.fixture
def backlog(vault, make_settings) -> Iterator[Callable[[], StrongQueue]]:
    for i in range(NOTES):
        vault.write(f"n{i:02d}.md", note_text(i))
    made: list[Indexer] = []

    def make() -> StrongQueue:
        settings = make_settings(chunk={"max_tokens": 48, "overlap": 0, "min_tokens": 8})
        strong = make_embedder(EmbedSettings(provider="local"))
        indexer = Indexer(settings, open_index(settings), None, None, strong=strong)
        made.append(indexer)
        indexer.sync()
        return StrongQueue(indexer)

    yield make
    for indexer in made:
        indexer.index.close()


def test_every_note_has_several_chunks(backlog):
    b = backlog()
    assert len(b.leads()) == NOTES
    assert len(b.chunks()) >= 3 * NOTES


def test_the_first_batches_of_the_strong_backlog_are_the_notes_lead_chunks(backlog):
    b = backlog()
    leads = b.leads()
    embedded: set[int] = set()
    while len(embedded) < len(leads):
        written, batch = b.batch(5)
        assert written == len(batch) > 0
        if len(embedded) + len(batch) <= len(leads):
            assert batch <= leads, "a batch before the leads are done holds only leads"
        embedded |= batch
    assert leads <= embedded
    assert len(embedded) == len(leads) + (5 - len(leads) % 5) % 5  # the rest start after them


def test_the_leads_are_exactly_the_first_vectors_then_the_rest(backlog):
    b = backlog()
    leads, chunks = b.leads(), b.chunks()
    written, first = b.batch(len(leads))
    assert written == len(leads) and first == leads
    assert b.coverage() == (len(leads), len(chunks))
    written, rest = b.batch(10**6)
    assert rest == chunks - leads and written == len(rest)


def test_nothing_is_embedded_twice_and_coverage_reaches_all_chunks(backlog):
    b = backlog()
    chunks = b.chunks()
    seen: list[int] = []
    total = 0
    while True:
        written, batch = b.batch(7)
        total += written
        seen.extend(batch)
        if written == 0:
            break
    assert len(seen) == len(set(seen)) == len(chunks) == total
    assert set(seen) == chunks
    assert b.coverage() == (len(chunks), len(chunks))
    assert b.pending() == set()


def test_a_note_edited_mid_backlog_gets_its_new_lead_among_the_leads(backlog, vault):
    b = backlog()
    leads = b.leads()
    b.batch(len(leads) + 5)  # the leads and a few others
    vault.write("n03.md", note_text(3, edit=" (edited)"))  # its chunks are replaced
    vault.write("n20.md", "# Note 20\n\nA new note, one chunk.\n")
    b.indexer.sync()
    new_leads = b.leads() - leads
    assert len(new_leads) == 1  # n03's new first chunk (n20 is no note of NOTES)
    written, batch = b.batch(2)
    # The new lead chunks come first: n03's and the new note's, before the others left.
    assert batch == new_leads | {b.lead_of("n20.md")}
    while b.batch(10)[0]:
        pass
    done, total = b.coverage()
    assert done == total == len(b.chunks()) + 1  # + n20's one chunk
    assert b.pending() == set()


def test_an_edit_during_the_leads_puts_its_new_lead_before_every_other_chunk(backlog, vault):
    b = backlog()
    leads = b.leads()
    _, first = b.batch(5)  # five leads embedded, seven left
    edited = next(i for i in range(NOTES) if b.lead_of(f"n{i:02d}.md") in first)
    vault.write(f"n{edited:02d}.md", note_text(edited, edit=" (edited)"))
    b.indexer.sync()
    now = b.leads()
    left = now & b.pending()
    assert len(left) == len(leads) - 5 + 1 and b.lead_of(f"n{edited:02d}.md") in left
    _, batch = b.batch(len(left))
    assert batch == left, "every lead left, the edited note's new one among them, comes first"
    _, batch = b.batch(10**6)
    assert batch == b.chunks() - now and b.pending() == set()


def test_a_failed_batch_keeps_the_leads_ahead(vault, make_settings, llm_server):
    """A model call that fails marks nothing done and moves nothing: the next batches
    still bring the leads left first."""
    for i in range(NOTES):
        vault.write(f"n{i:02d}.md", note_text(i))
    settings = make_settings(chunk={"max_tokens": 48, "overlap": 0, "min_tokens": 8})
    remote = {
        "provider": "ollama",
        "base_url": llm_server.url,
        "model": "fake-strong",
        "dimension": 8,
        "timeout_seconds": 5,
    }
    strong = make_embedder(EmbedSettings(**remote))
    indexer = Indexer(settings, open_index(settings), None, None, strong=strong)
    try:
        indexer.sync()
        b = StrongQueue(indexer)
        leads = b.leads()
        assert b.batch(4)[1] <= leads
        llm_server.behaviour.mode = "error500"
        assert b.batch(4) == (0, set())
        llm_server.behaviour.mode = "ok"
        indexer.strong_backoff.succeeded()  # no waiting out the back-off
        left = leads & b.pending()
        assert len(left) == len(leads) - 4
        assert b.batch(len(left))[1] == left
    finally:
        indexer.index.close()


def test_the_port_orders_leads_first_on_request_and_newest_first_without(backlog):
    b = backlog()
    leads = b.leads()
    with b.index.read() as r:
        pending = r.pending_chunks(10**6, STRONG, leads=LeadsFirst())
        newest = [p.rowid for p in r.pending_chunks(10**6, STRONG)]
        few = [p.rowid for p in r.pending_chunks(3, STRONG, leads=LeadsFirst())]
    ordered = [p.rowid for p in pending]
    assert ordered[: len(leads)] == sorted(leads, reverse=True)  # newest lead first
    assert [p.lead for p in pending] == [p.rowid in leads for p in pending]
    rest = ordered[len(leads) :]
    assert rest == sorted(rest, reverse=True)
    assert newest == sorted(newest, reverse=True) and set(newest) == set(ordered)
    assert few == ordered[:3]


def test_the_port_looks_for_leads_past_the_last_one_embedded(backlog):
    b = backlog()
    order = sorted(b.leads(), reverse=True)
    with b.index.read() as r:
        past = [p.rowid for p in r.pending_chunks(4, STRONG, leads=LeadsFirst(order[3]))]
        after_all = r.pending_chunks(4, STRONG, leads=LeadsFirst(order[-1]))
    assert past == order[4:8]
    assert not any(p.lead for p in after_all) and len(after_all) == 4


def test_an_index_runs_call_of_64_is_one_model_call(backlog):
    """`index` asks the strong tier for 64 chunks at a time (cli._vector_phase): they go to
    the model in one call, so each call's start and end, where a core waits, come once."""
    b = backlog()
    strong = b.indexer.strong
    calls: list[int] = []
    embed = strong.embed

    def counted(texts):
        calls.append(len(texts))
        return embed(texts)

    strong.embed = counted
    chunks = len(b.chunks())
    assert 32 < chunks <= 64
    written, _ = b.batch(64)
    assert written == chunks
    assert calls == [chunks]
