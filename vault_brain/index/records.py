"""The records that cross the index's border (index/port.py): what callers give it and what
it gives back.

Plain immutable records with no SQL in them, so every backend (SQLite, Postgres for team
brains) takes and returns the same things. NamedTuples rather than frozen dataclasses: a
process pays ~1 ms at import for each frozen dataclass (Python 3.11 compiles six methods
per class), 15 ms of a one-shot CLI search for this module alone, and a NamedTuple is as
immutable; use `_replace`, not `dataclasses.replace`. A note's `rowid` and a chunk's
`chunk_rowid` are the integer keys the backend gives them, stable while they stay indexed.
"""

# No `from __future__ import annotations`: NamedTuple compiles every string annotation
# (typing.ForwardRef), which cost as much as the dataclasses did.
from collections.abc import Sequence
from typing import NamedTuple

# Embedding tiers, by name: the instant model answers at once, the strong one takes over
# once it covers the vault. Where a tier's vectors live is each backend's business.
INSTANT, STRONG = "instant", "strong"
TIERS = (INSTANT, STRONG)
# The indexer role's holders: "watch" (a watcher in `watch` or `serve`: keeps the index in
# step while it runs), "index" (an explicit pass: `vault-brain index`), "refresh" (a
# one-shot read catching up).
WATCH, INDEX, REFRESH = "watch", "index", "refresh"


class Filters(NamedTuple):
    """Which notes a search or a listing may return. Tags are ANDed; each matches itself
    and its sub-tags (`project` matches `project/alpha`)."""

    tags: tuple[str, ...] = ()
    folder: str | None = None  # the folder and everything below it, case-insensitive
    since: str | None = None  # ISO 8601 UTC, inclusive
    until: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.tags or self.folder or self.since or self.until)


class TextQuery(NamedTuple):
    """A full-text query after analysis: each group is one query word in its indexed forms
    (stems in several languages, CJK bigrams; a form ending in * matches as a prefix); a
    note matches a group through any form. Groups are ORed: a store ranks notes higher the
    more and the rarer the groups they hold (SQLite: FTS5's bm25)."""

    groups: tuple[tuple[str, ...], ...]

    def __bool__(self) -> bool:
        return bool(self.groups)


class TextHit(NamedTuple):
    """One note the full-text question found."""

    note_rowid: int
    chunk_rowid: int  # its best chunk: the snippet comes from it
    score: float  # higher is better, on the backend's own scale
    matched: frozenset[int] = frozenset()  # the query's groups its whole text holds


class TextRanking(NamedTuple):
    """The full-text arm's answer: notes best first, and what the calibration weighs
    their words with (search/calibration.py). `matched` is filled for the best `evidence`
    notes asked for; `notes` and `doc_freq` whenever a note was found."""

    hits: Sequence[TextHit] = ()
    notes: int = 0  # notes in the index
    doc_freq: tuple[int, ...] = ()  # per group of the query: notes whose text holds it


class StoredStat(NamedTuple):
    """A note's stat as the index holds it, one per note at every stat pass: a NamedTuple
    for the same reason as vault/scan.py's FileStat (10x cheaper to make)."""

    rowid: int
    mtime_ns: int
    size: int
    content_hash: str


class NoteRow(NamedTuple):
    """What the indexer stores for one note (built by sync from a parsed Note)."""

    path: str
    id: str
    claimed_id: str
    title: str
    summary: str
    lead: str
    created: str | None
    updated: str | None
    sort_time: str
    folder: str
    stem_key: str
    path_key: str
    aliases: tuple[str, ...]
    mtime_ns: int
    size: int
    content_hash: str
    body_hash: str
    version: str
    summary_pending: bool
    lang: str = ""  # the language its full text was analysed in (text/analysis.py)
    fts: tuple[str, str, str] | None = None  # analysed (title, headings, body) of the note


class ChunkRow(NamedTuple):
    ordinal: int
    heading_path: str
    text: str
    text_hash: str
    tokens: int
    fts_title: str
    fts_headings: str
    fts_body: str


class LinkRow(NamedTuple):
    target: str
    heading: str | None
    alias: str | None
    embed: bool


class NoteInfo(NamedTuple):
    rowid: int
    id: str
    path: str
    title: str
    summary: str  # the best summary we have: frontmatter, else LLM, else lead
    created: str | None
    updated: str | None
    sort_time: str
    aliases: tuple[str, ...]
    version: str
    folder: str


class LinkInfo(NamedTuple):
    """One outgoing link of a note, with the note it resolves to (None: no such note)."""

    target: str
    heading: str | None
    alias: str | None
    embed: bool
    resolved: NoteInfo | None


class ChunkHit(NamedTuple):
    chunk_rowid: int
    note_rowid: int
    score: float  # higher is better (vectors: cosine similarity)


class VectorHits(NamedTuple):
    """The vector arm's answer: the best chunks, and the query's cosine against every chunk
    summarised (its noise level), which calibrates what a cosine means for this query."""

    hits: list[ChunkHit]
    median: float
    spread: float  # a robust standard deviation (1.4826 · MAD) of all cosines


class PendingChunk(NamedTuple):
    rowid: int
    text_hash: str
    embed_text: str
    lead: bool = False  # its note's first chunk, asked for first (LeadsFirst)


class LeadsFirst(NamedTuple):
    """pending_chunks' order for a backlog: every note's lead chunk (its first: the title
    and opening lines) before all other chunks, each part in the tier's order. `past`: the
    last lead the backlog embedded; the leads still pending lie past it in that order (the
    caller says so after each batch), so a query starts there instead of walking again over
    the chunks earlier batches passed. None: look from the start."""

    past: int | None = None


class PendingSummary(NamedTuple):
    rowid: int
    path: str
    title: str
    version: str


class Counts(NamedTuple):
    notes: int
    chunks: int
    vectors: int
    pending_vectors: int
    pending_summaries: int
    strong_vectors: int = 0  # chunks the strong tier has embedded


class Holder(NamedTuple):
    """The process holding the indexer role; pid and role are None when it did not say
    (a vault-brain from before the record, or a holder in the instant it took the role)."""

    pid: int | None
    role: str | None

    @property
    def keeps_in_step(self) -> bool:
        """A watcher, which keeps the index in step for as long as it runs."""
        return self.role in (WATCH, None)
