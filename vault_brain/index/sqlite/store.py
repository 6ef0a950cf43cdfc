"""Named queries over the SQLite sidecar: the SQLite backend's answers to the port.

`Reads` answers every read role of index/port.py, `Writes` (a `Reads` too) every write role;
`SqliteIndex` (index/sqlite/db.py) lends them out over its connections. Callers never build
SQL and never see a connection: they call these methods with records (index/records.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from vault_brain.index.links import link_keys
from vault_brain.index.ranking import rank_text
from vault_brain.index.records import (
    INSTANT,
    STRONG,
    ChunkHit,
    ChunkRow,
    Counts,
    Filters,
    LeadsFirst,
    LinkInfo,
    LinkRow,
    NoteInfo,
    NoteRow,
    PendingChunk,
    PendingSummary,
    StoredStat,
    TextQuery,
    TextRanking,
    VectorHits,
)
from vault_brain.index.shared import (
    NOTE_COLUMNS,
    Tier,
    decode_cursor,
    encode_cursor,
    key_resolver,
    like_prefix,
    make_tiers,
    note_info,
    notes_near_mean,
    pending_in_order,
    related_notes,
    tier_named,
    with_parents,
)
from vault_brain.index.sqlite import fulltext, totals
from vault_brain.index.sqlite.schema import INDEX_NAMES, PUT_OFF, missing_indexes
from vault_brain.index.text import languages_of

if TYPE_CHECKING:
    import numpy as np

Connection = object  # a DB-API connection of the binding index/sqlite/db.py picked
T = TypeVar("T")

VECTOR_TABLE = "chunk_vectors"  # the instant tier's table (kept for tests and tools)


TIERS = make_tiers(VECTOR_TABLE, "chunk_vectors_strong")
NOW_SQL = "((julianday('now') - 2440587.5) * 86400.0)"  # Unix time, in any SQLite
# Column weights for bm25(): title, heading path, body.
FTS_WEIGHTS = (2.0, 1.0, 1.0)
# Above this many link keys to resolve at once, resolve_links reads every note once.
BATCH_RESOLVE = 50


def filter_sql(filters: Filters, alias: str = "n") -> tuple[str, list[object]]:
    """A WHERE fragment over notes (alias n) and its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if filters.folder:
        folder = filters.folder.strip("/")
        parts.append(f"({alias}.folder = ? COLLATE NOCASE OR {alias}.folder LIKE ? ESCAPE '\\')")
        params += [folder, like_prefix(folder) + "/%"]
    for tag in filters.tags:
        tag = tag.lower().lstrip("#")
        parts.append(
            f"EXISTS (SELECT 1 FROM tags t WHERE t.note_rowid = {alias}.rowid "
            f"AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
        )
        params += [tag, like_prefix(tag) + "/%"]
    if filters.since:
        parts.append(f"{alias}.sort_time >= ?")
        params.append(filters.since)
    if filters.until:
        parts.append(f"{alias}.sort_time <= ?")
        params.append(filters.until)
    return (" AND ".join(parts) or "1"), params


def match_expression(query: TextQuery) -> str:
    """FTS5 MATCH text for an analysed query (see fulltext.match_groups)."""
    return fulltext.match_groups(query.groups) or '""'


def _tier(name: str) -> Tier:
    return tier_named(TIERS, name)


class Reads:
    """Queries that only read. Safe on any connection from the reader pool."""

    def __init__(
        self, conn: Connection, owner: object | None = None, memo: dict | None = None
    ) -> None:
        self.conn = conn
        self._owner = owner  # the SqliteIndex, whose in-memory vector matrix is shared
        self._memo = memo  # a reader connection's remembered values (per_version)

    def per_version(self, name: str, compute: Callable[[], T]) -> T:
        """compute(), remembered on a reader connection until any connection commits to
        the index (PRAGMA data_version moves then; inside a read it is the snapshot's).
        Never remembered on the write connection: its own commits do not move it."""
        if self._memo is None:
            return compute()
        version = self._one("PRAGMA data_version")[0]  # type: ignore[index]
        kept = self._memo.get(name)
        if kept is not None and kept[0] == version:
            return kept[1]
        value = compute()
        self._memo[name] = (version, value)
        return value

    def _one(self, sql: str, params: Sequence[object] = ()) -> tuple | None:
        return self.conn.execute(sql, params).fetchone()  # type: ignore[attr-defined]

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()  # type: ignore[attr-defined]

    # -- meta ----------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return row[0] if row else None

    def parsed_meta(self, key: str, parse: Callable[[str | None], T]) -> T:
        return self.per_version(f"meta:{key}", lambda: parse(self.get_meta(key)))

    # -- notes ---------------------------------------------------------------------------

    def load_stats(self) -> dict[str, StoredStat]:
        rows = self._all("SELECT path, rowid, mtime_ns, size, content_hash FROM notes")
        return {r[0]: StoredStat(r[1], r[2], r[3], r[4]) for r in rows}

    def note_stats(self) -> list[tuple[str, int, int]]:
        # Remembered until the index changes: a watcher's, server's or resident's stat
        # pass compares against it without reading every note's row again.
        return self.per_version(
            "note_stats", lambda: self._all("SELECT path, mtime_ns, size FROM notes ORDER BY path")
        )

    def load_stats_under(self, rel: str) -> dict[str, StoredStat]:
        """The note at `rel` and every note below it (a folder): one indexed range scan."""
        rows = self._all(
            "SELECT path, rowid, mtime_ns, size, content_hash FROM notes "
            "WHERE path = ? OR (path >= ? AND path < ?)",
            (rel, rel + "/", rel + "0"),  # '0' is the character after '/'
        )
        return {r[0]: StoredStat(r[1], r[2], r[3], r[4]) for r in rows}

    def load_stat(self, path: str) -> StoredStat | None:
        row = self._one(
            "SELECT rowid, mtime_ns, size, content_hash FROM notes WHERE path = ?", (path,)
        )
        return StoredStat(*row) if row else None

    def id_holder(self, note_id: str) -> str | None:
        row = self._one("SELECT path FROM notes WHERE id = ?", (note_id,))
        return row[0] if row else None

    def id_of(self, path: str) -> str | None:
        row = self._one("SELECT id FROM notes WHERE path = ?", (path,))
        return row[0] if row else None

    def first_claimant(self, note_id: str) -> str | None:
        """The path, first in path order, of a note whose file asks for this id."""
        row = self._one(
            "SELECT path FROM notes WHERE claimed_id = ? ORDER BY path LIMIT 1", (note_id,)
        )
        return row[0] if row else None

    def keys_of(self, rowid: int) -> set[str]:
        """The link keys that can reach this note now (see `link_keys`)."""
        row = self._one("SELECT path_key, aliases FROM notes WHERE rowid = ?", (rowid,))
        if row is None:
            return set()
        return link_keys(row[0], json.loads(row[1] or "[]"))

    def _first_note(self, where: str, params: Sequence[object], order: str = "") -> NoteInfo | None:
        order_by = f" ORDER BY {order}" if order else ""
        row = self._one(f"SELECT {NOTE_COLUMNS} FROM notes n {where}{order_by} LIMIT 1", params)
        return note_info(row) if row else None

    def note_by_id(self, note_id: str) -> NoteInfo | None:
        return self._first_note("WHERE n.id = ?", (note_id,))

    def note_by_path(self, path: str) -> NoteInfo | None:
        # Then any case: case-insensitive file systems and hand-typed paths.
        return self._first_note("WHERE n.path = ?", (path,)) or self._first_note(
            "WHERE n.path = ? COLLATE NOCASE", (path,)
        )

    def notes_by_title(self, title: str, limit: int) -> list[NoteInfo]:
        """Notes with exactly this title, any case (several may share it), by path."""
        return self._notes("WHERE n.title = ? COLLATE NOCASE", (title,), limit)

    def notes_by_alias(self, alias: str, limit: int) -> list[NoteInfo]:
        return self._notes(
            "JOIN aliases a ON a.note_rowid = n.rowid WHERE a.alias_key = ?",
            (alias.lower(),),
            limit,
        )

    def notes_by_stem(self, stem: str, limit: int) -> list[NoteInfo]:
        """Notes with this file name (without its folder and .md), anywhere in the vault."""
        return self._notes("WHERE n.stem_key = ?", (stem.lower(),), limit)

    def _notes(self, where: str, params: Sequence[object], limit: int) -> list[NoteInfo]:
        rows = self._all(
            f"SELECT DISTINCT {NOTE_COLUMNS} FROM notes n {where} "
            "ORDER BY length(n.path), n.path LIMIT ?",
            (*params, limit),
        )
        return [note_info(r) for r in rows]

    def redirect(self, old_id: str) -> str | None:
        """The id a moved note has now, if `old_id` was its id before the move."""
        row = self._one("SELECT new_id FROM id_redirects WHERE old_id = ?", (old_id,))
        return row[0] if row else None

    def names(self) -> list[tuple[str, int]]:
        """(title or alias, note rowid) of every note: candidates for "did you mean"."""
        rows = self._all("SELECT title, rowid FROM notes")
        rows += self._all("SELECT alias_key, note_rowid FROM aliases")
        return [(r[0], r[1]) for r in rows]

    def folders(self) -> list[str]:
        """Every folder that holds notes, with its parents."""
        rows = self._all("SELECT DISTINCT folder FROM notes WHERE folder != ''")
        return with_parents(r[0] for r in rows)

    def folder_exists(self, folder: str) -> bool:
        folder = folder.strip("/")
        row = self._one(
            "SELECT 1 FROM notes WHERE folder = ? COLLATE NOCASE "
            "OR folder LIKE ? ESCAPE '\\' LIMIT 1",
            (folder, like_prefix(folder) + "/%"),
        )
        return row is not None

    def notes_by_rowids(self, rowids: Sequence[int]) -> dict[int, NoteInfo]:
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self._all(f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.rowid IN ({marks})", rowids)
        return {r[0]: note_info(r) for r in rows}

    def note_with_body(self, body_hash: str) -> NoteInfo | None:
        return self._first_note("WHERE n.body_hash = ?", (body_hash,), "n.path")

    def list_notes(
        self, filters: Filters, limit: int, after: str | None = None
    ) -> tuple[list[NoteInfo], str | None]:
        """Newest first by (sort_time, rowid): a keyset cursor (the last note's pair, in
        base64 JSON) stays right while notes come."""
        where, params = filter_sql(filters)
        if after is not None:
            sort_time, rowid = decode_cursor(after)
            where += " AND (n.sort_time < ? OR (n.sort_time = ? AND n.rowid < ?))"
            params += [sort_time, sort_time, rowid]
        rows = self._all(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE {where} "
            f"ORDER BY n.sort_time DESC, n.rowid DESC LIMIT ?",
            (*params, limit + 1),
        )
        notes = [note_info(r) for r in rows[:limit]]
        more = len(rows) > limit and notes
        return notes, encode_cursor(notes[-1].sort_time, notes[-1].rowid) if more else None

    def note_count(self) -> int:
        return self._one("SELECT count(*) FROM notes")[0]  # type: ignore[index]

    def has_notes(self) -> bool:
        return self._one("SELECT 1 FROM notes LIMIT 1") is not None

    def counts(self) -> Counts:
        notes = self._one("SELECT count(*) FROM notes")[0]  # type: ignore[index]
        chunks = self._one("SELECT count(*) FROM chunks")[0]  # type: ignore[index]
        pending = self._one("SELECT count(*) FROM chunks WHERE vec_state = 0")[0]  # type: ignore[index]
        strong = self._one("SELECT count(*) FROM chunks WHERE strong_state = 0")[0]  # type: ignore[index]
        summaries = self._one("SELECT count(*) FROM notes WHERE summary_state = 1")[0]  # type: ignore[index]
        return Counts(notes, chunks, chunks - pending, pending, summaries, chunks - strong)

    def strong_backlog(self, at_most: int) -> int:
        """Chunks without a strong vector, counted no further than at_most + 1."""
        return self._one(
            "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE strong_state = 0 LIMIT ?)",
            (at_most + 1,),
        )[0]  # type: ignore[index]

    def strong_covers(self, share: float) -> bool:
        """True when the strong tier has vectors for at least `share` of the chunks. A search
        asks this every time, so it counts no further than the pending chunks that decide
        it (counts() scans whole columns: 1.3 ms on cpp-docs)."""
        chunks = self._one("SELECT count(*) FROM chunks")[0]  # type: ignore[index]
        if not chunks:
            return False
        allowed = math.floor(chunks - share * chunks)  # pending chunks that still cover it
        return self.strong_backlog(allowed) <= allowed

    # -- links ---------------------------------------------------------------------------

    def resolve_key(self, key: str) -> int | None:
        """Obsidian's resolution of a link target (lowercased, without .md): a path (with
        folders) or a file name, the shortest path first, else an alias."""
        if "/" in key:
            # A path that is the key or ends in "/key" has the key's last part as its stem:
            # the stem index finds the few candidates, where the LIKE alone read every note
            # (1.4 ms a key on cpp-docs; an edited note resolves several).
            row = self._one(
                "SELECT rowid FROM notes WHERE stem_key = ? "
                "AND (path_key = ? OR path_key LIKE ? ESCAPE '\\') "
                "ORDER BY length(path), path LIMIT 1",
                (key.rsplit("/", 1)[-1], key, "%/" + like_prefix(key)),
            )
        else:
            row = self._one(
                "SELECT rowid FROM notes WHERE stem_key = ? ORDER BY length(path), path LIMIT 1",
                (key,),
            )
        if row is None:
            row = self._one(
                "SELECT n.rowid FROM notes n JOIN aliases a ON a.note_rowid = n.rowid "
                "WHERE a.alias_key = ? ORDER BY n.path LIMIT 1",
                (key,),
            )
        return row[0] if row else None

    def key_resolver(self) -> Callable[[str], int | None]:
        """resolve_key's rule over every note at once: the same answers (tested), one read."""
        return key_resolver(
            self._all("SELECT rowid, path, stem_key, path_key FROM notes"),
            self._all(
                "SELECT a.alias_key, n.path, n.rowid FROM aliases a "
                "JOIN notes n ON n.rowid = a.note_rowid"
            ),
        )

    def links_of(self, rowid: int) -> list[LinkInfo]:
        """A note's outgoing links in order, each with the note it resolves to."""
        rows = self._all(
            "SELECT target, heading, alias, embed, target_rowid FROM links "
            "WHERE note_rowid = ? ORDER BY ordinal",
            (rowid,),
        )
        targets = self.notes_by_rowids(sorted({r[4] for r in rows if r[4] is not None}))
        return [
            LinkInfo(r[0], r[1], r[2], bool(r[3]), targets.get(r[4]) if r[4] else None)
            for r in rows
        ]

    def backlinks(self, rowid: int) -> list[NoteInfo]:
        """Notes that link to this one, by path: one indexed lookup (targets are resolved
        when notes are indexed)."""
        rows = self._all(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.rowid IN "
            "(SELECT note_rowid FROM links WHERE target_rowid = ? AND note_rowid != ?) "
            "ORDER BY n.path",
            (rowid, rowid),
        )
        return [note_info(r) for r in rows]

    def related(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[NoteInfo]:
        """index/port.py's contract, in index/shared.py's order: link neighbours, then the
        notes nearest to the mean of this note's chunk vectors."""
        return related_notes(self, rowid, limit, tiers)

    def linked_notes(self, rowid: int, limit: int) -> list[int]:
        rows = self._all(
            """SELECT target_rowid FROM links WHERE note_rowid = ?1
                   AND target_rowid IS NOT NULL AND target_rowid != ?1
               GROUP BY target_rowid ORDER BY min(ordinal) LIMIT ?2""",
            (rowid, limit),
        )
        return [r[0] for r in rows]

    def linking_notes(self, rowid: int, limit: int) -> list[int]:
        rows = self._all(
            """SELECT n.rowid FROM notes n WHERE n.rowid IN
                   (SELECT note_rowid FROM links WHERE target_rowid = ?1 AND note_rowid != ?1)
               ORDER BY n.path LIMIT ?2""",
            (rowid, limit),
        )
        return [r[0] for r in rows]

    def nearest_notes(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[int]:
        """Other notes by the cosine of their mean vector to this note's (the in-memory
        matrix, 1 ms on cpp-docs), in the first tier that holds vectors of it. A one-shot
        process (the CLI) holds no matrix: sqlite-vec's KNN ranks other notes by their best
        chunk against this note's mean instead (the port allows that approximation)."""
        import numpy as np

        for tier in tiers:
            held = self.vectors_model(tier)
            if held is None:
                continue
            if self._owner is not None and not self._owner.one_shot:  # type: ignore[attr-defined]
                matrix = self._owner.matrix_of(tier)  # type: ignore[attr-defined]
                found = matrix.nearest_notes(self, held[0], rowid, limit, tier)
                if found:
                    return found
                if found is not None:
                    continue  # no vectors of this note in this tier
            rows = self._all(
                f"""SELECT v.embedding FROM chunks c
                    JOIN {_tier(tier).table} v ON v.rowid = c.rowid WHERE c.note_rowid = ?""",
                (rowid,),
            )
            if not rows:
                continue
            own = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32)
            mean = own.reshape(len(rows), -1).mean(axis=0)
            return notes_near_mean(self, rowid, mean, len(rows), held[0], tier, limit)
        return []

    # -- full text -----------------------------------------------------------------------

    def search_text(self, query: TextQuery, filters: Filters, limit: int) -> list[ChunkHit]:
        """Chunks ranked by bm25 (higher score is better)."""
        if not query:
            return []
        match = match_expression(query)
        w = FTS_WEIGHTS
        if not filters.active:
            return self._ranked_chunks(match, "", (), limit)
        where, params = filter_sql(filters)
        rows = self._all(
            f"""SELECT f.rowid, c.note_rowid, bm25(chunks_fts, {w[0]}, {w[1]}, {w[2]}) AS s
                FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid
                JOIN notes n ON n.rowid = c.note_rowid
                WHERE chunks_fts MATCH ? AND {where}
                ORDER BY s LIMIT ?""",
            (match, *params, limit),
        )
        return [ChunkHit(r[0], r[1], -r[2]) for r in rows]

    def search_text_within(
        self, query: TextQuery, note_rowids: Sequence[int], limit: int
    ) -> list[ChunkHit]:
        """The chunks of these notes ranked by bm25 (the same scores as search_text's):
        bm25 is computed for their chunks only, 1.1 ms a query on cpp-docs where ranking
        every matching chunk took 3.8 (means over 200 title and heading queries)."""
        if not query or not note_rowids:
            return []
        marks = ",".join("?" * len(note_rowids))
        return self._ranked_chunks(
            match_expression(query),
            f"AND +rowid IN (SELECT rowid FROM chunks WHERE note_rowid IN ({marks}))",
            note_rowids,
            limit,
        )

    def _ranked_chunks(
        self, match: str, where: str, params: Sequence[object], limit: int
    ) -> list[ChunkHit]:
        """Rank inside FTS5 first and join only the top rows: 2-3x faster on big vaults."""
        w = FTS_WEIGHTS
        rows = self._all(
            f"""SELECT f.rowid, c.note_rowid, f.s FROM (
                    SELECT rowid, bm25(chunks_fts, {w[0]}, {w[1]}, {w[2]}) AS s
                    FROM chunks_fts WHERE chunks_fts MATCH ? {where} ORDER BY s LIMIT ?
                ) f JOIN chunks c ON c.rowid = f.rowid ORDER BY f.s""",
            (match, *params, limit),
        )
        return [ChunkHit(r[0], r[1], -r[2]) for r in rows]

    def note_languages(self) -> dict[str, int]:
        """How many notes were analysed in each language."""
        rows = self._all("SELECT lang, count(*) FROM notes GROUP BY lang")
        return {r[0]: r[1] for r in rows if r[0]}

    def vault_languages(self) -> tuple[tuple[str, ...], str | None]:
        """index/text.py's languages_of over this index, remembered until the index changes
        (counting them took 0.3 ms of every search)."""
        return self.per_version(
            "vault_languages",
            lambda: languages_of(self.note_languages(), self.get_meta("text_languages")),
        )

    def rank_text(
        self, query: TextQuery, filters: Filters, *, notes: int, note_weight: float, evidence: int
    ) -> TextRanking:
        """The full-text question (index/port.py's TextSearch), answered with FTS5 bm25
        (index/ranking.py puts notes and chunks together)."""
        return rank_text(self, query, filters, notes, note_weight, evidence)

    def search_text_notes(
        self, query: TextQuery, filters: Filters, limit: int
    ) -> list[tuple[int, float]]:
        """(note rowid, -bm25) of the notes whose whole text matches best, best first."""
        if not query:
            return []
        match = match_expression(query)
        w = FTS_WEIGHTS
        if not filters.active:
            rows = self._all(
                f"""SELECT rowid, bm25(notes_fts, {w[0]}, {w[1]}, {w[2]}) AS s FROM notes_fts
                    WHERE notes_fts MATCH ? ORDER BY s LIMIT ?""",
                (match, limit),
            )
        else:
            where, params = filter_sql(filters)
            rows = self._all(
                f"""SELECT f.rowid, bm25(notes_fts, {w[0]}, {w[1]}, {w[2]}) AS s
                    FROM notes_fts f JOIN notes n ON n.rowid = f.rowid
                    WHERE notes_fts MATCH ? AND {where} ORDER BY s LIMIT ?""",
                (match, *params, limit),
            )
        return [(r[0], -r[1]) for r in rows]

    def text_stats(self, query: TextQuery) -> tuple[int, list[int]]:
        """(notes in the index, notes holding each group of the query): for idf weights. A
        group's count is its most frequent form's (a prefix form counts its terms)."""
        notes = self.per_version("notes", self.note_count)
        counts = []
        for group in query.groups:
            best = 0
            for form in group:
                if form.endswith("*"):
                    stem = form.rstrip("*")
                    row = self._one(
                        "SELECT max(doc) FROM notes_vocab WHERE term >= ? AND term < ?",
                        (stem, stem + "\U0010ffff"),
                    )
                else:
                    row = self._one("SELECT doc FROM notes_vocab WHERE term = ?", (form,))
                best = max(best, (row[0] or 0) if row else 0)
            counts.append(best)
        return notes, counts

    def text_matches(self, query: TextQuery, note_rowids: Sequence[int]) -> dict[int, set[int]]:
        """For each of these notes, which groups of the query its whole text holds."""
        found: dict[int, set[int]] = {}
        if not note_rowids:
            return found
        marks = ",".join("?" * len(note_rowids))
        for i, group in enumerate(query.groups):
            match = fulltext.match_groups([group])
            if not match:
                continue
            # `+rowid`: the list is filtered after one MATCH. A plain `rowid IN` is handed to
            # FTS5, which runs the MATCH again for every rowid (8x slower on cpp-docs).
            rows = self._all(
                f"SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? AND +rowid IN ({marks})",
                (match, *note_rowids),
            )
            for (rowid,) in rows:
                found.setdefault(rowid, set()).add(i)
        return found

    def chunks_of_notes(self, note_rowids: Sequence[int]) -> list[tuple[int, int, str, str]]:
        """(note rowid, chunk rowid, chunk text, note language) of every chunk of these."""
        if not note_rowids:
            return []
        marks = ",".join("?" * len(note_rowids))
        return [
            (r[0], r[1], r[2], r[3])
            for r in self._all(
                f"""SELECT c.note_rowid, c.rowid, c.text, n.lang FROM chunks c
                    JOIN notes n ON n.rowid = c.note_rowid
                    WHERE c.note_rowid IN ({marks}) ORDER BY c.rowid""",
                list(note_rowids),
            )
        ]

    def chunk_texts(self, chunk_rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
        """(heading path, text) of each chunk."""
        if not chunk_rowids:
            return {}
        marks = ",".join("?" * len(chunk_rowids))
        rows = self._all(
            f"SELECT rowid, heading_path, text FROM chunks WHERE rowid IN ({marks})",
            chunk_rowids,
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    # -- vectors -------------------------------------------------------------------------

    def has_vector_table(self, tier: str = INSTANT) -> bool:
        table = _tier(tier).table
        return self._one("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)) is not None

    def vectors_model(self, tier: str = INSTANT) -> tuple[str, int] | None:
        """(model, dimension) of the vectors the tier's table holds, or None."""
        if not self.has_vector_table(tier):
            return None
        meta = _tier(tier).meta
        model, dim = self.get_meta(f"{meta}_model"), self.get_meta(f"{meta}_dim")
        return (model, int(dim)) if model and dim else None

    def vector_epoch(self, tier: str = INSTANT) -> str:
        return self.get_meta(f"{_tier(tier).meta}_epoch") or "0"

    def vector_count(self, tier: str = INSTANT) -> int:
        return self._one(f"SELECT count(*) FROM {_tier(tier).table}_rowids")[0]  # type: ignore[index]

    def all_vectors(self, tier: str = INSTANT) -> tuple[list[int], list[int], bytes]:
        """(chunk rowids, note rowids, concatenated float32 vectors) of the tier's table."""
        table = _tier(tier).table
        rows = self._all(
            f"SELECT v.rowid, c.note_rowid, v.embedding FROM {table} v "
            "JOIN chunks c ON c.rowid = v.rowid"
        )
        return [r[0] for r in rows], [r[1] for r in rows], b"".join(r[2] for r in rows)

    def vector_slots(self, tier: str = INSTANT) -> list[tuple[int, int, bytes, bytes]]:
        """The tier's vectors as sqlite-vec lays them out: (chunk id, slots, validity bitmap,
        int64 rowids) of each of its chunks in order, the order of its full scan (and of
        all_vectors). Empty where the table is not there or not laid out so."""
        table = _tier(tier).table
        shadows = {f"{table}_chunks", f"{table}_vector_chunks00"}
        marks = ",".join("?" * len(shadows))
        held = self._all(f"SELECT name FROM sqlite_master WHERE name IN ({marks})", list(shadows))
        if len(held) != len(shadows):  # no table, or another sqlite-vec layout
            return []
        return self._all(
            f"SELECT chunk_id, size, validity, rowids FROM {table}_chunks ORDER BY chunk_id"
        )

    def vector_slot_blobs(self, tier: str = INSTANT) -> Iterable[tuple[int, bytes]]:
        """(chunk id, its slots' float32 vectors, one after another), in vector_slots'
        order, one at a time."""
        table = _tier(tier).table
        yield from self.conn.execute(  # type: ignore[attr-defined]
            f"SELECT rowid, vectors FROM {table}_vector_chunks00 ORDER BY rowid"
        )

    def chunk_notes(self, chunk_rowids: Sequence[int]) -> dict[int, int]:
        """chunk rowid -> its note's rowid, for the chunks that exist."""
        found: dict[int, int] = {}
        for start in range(0, len(chunk_rowids), 500):
            part = list(chunk_rowids[start : start + 500])
            marks = ",".join("?" * len(part))
            found.update(
                self._all(f"SELECT rowid, note_rowid FROM chunks WHERE rowid IN ({marks})", part)
            )
        return found

    def filtered_chunk_rowids(self, filters: Filters) -> list[int]:
        """The chunks of the notes filtered_note_rowids gives."""
        where, params = filter_sql(filters)
        sql = f"SELECT c.rowid FROM chunks c JOIN notes n ON n.rowid = c.note_rowid WHERE {where}"
        return [r[0] for r in self._all(sql, params)]

    def filtered_note_rowids(self, filters: Filters) -> list[int]:
        where, params = filter_sql(filters)
        return [r[0] for r in self._all(f"SELECT n.rowid FROM notes n WHERE {where}", params)]

    def nearest_chunks(
        self,
        model: str,
        vector: np.ndarray,
        filters: Filters,
        *,
        k: int,
        tier: str = INSTANT,
        noise: bool = True,
    ) -> VectorHits:
        """The k chunks nearest to `vector` among the tier's vectors of `model` (cosine),
        with the query's noise level over every chunk unless the caller needs none. The
        in-memory matrix answers where it can (index/sqlite/matrix.py); a one-shot process
        holds none and scans sqlite-vec's chunks with the same arithmetic (vecscan.scan: the
        same answer); sqlite-vec's KNN beyond them."""
        if self._owner is not None:
            if self._owner.one_shot:  # type: ignore[attr-defined]
                from vault_brain.index.sqlite import vecscan  # (numpy-free where it can be)

                if vecscan.native() is not None:
                    found = vecscan.scan(self, vector, filters, k, tier, noise)
                else:
                    from vault_brain.index.sqlite import matrix

                    found = matrix.scan(self, vector, filters, k, tier, noise)
            else:
                found = self._owner.matrix_of(tier).search(  # type: ignore[attr-defined]
                    self, model, vector, filters, k, tier, noise
                )
            if found is not None:
                return found
        return VectorHits(self.knn_vectors(vector, filters, k, tier), 0.0, 0.0)

    def nearest_chunk_each(
        self, model: str, vectors: np.ndarray, *, tier: str = INSTANT
    ) -> list[ChunkHit | None]:
        """As nearest_chunks(k=1, no noise) would answer each row: the in-memory matrix
        (made here in a one-shot process too: its scan gives the same answers) answers them
        all with one matrix product (index/sqlite/matrix.py); sqlite-vec beyond it."""
        if len(vectors) == 0:
            return []
        if self.vectors_model(tier) is None:
            return [None] * len(vectors)
        if self._owner is not None:
            matrix = self._owner.matrix_of(tier)  # type: ignore[attr-defined]
            found = matrix.nearest_each(self, model, vectors, tier)
            if found is not None:
                return found
        return [
            (hits[0] if hits else None)
            for hits in (self.knn_vectors(v, Filters(), 1, tier) for v in vectors)
        ]

    def knn_vectors(
        self, vector: np.ndarray, filters: Filters, k: int, tier: str = INSTANT
    ) -> list[ChunkHit]:
        """sqlite-vec's own search: for vaults too large for the in-memory matrix."""
        import numpy as np

        table = _tier(tier).table
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        if filters.active:
            # Exact scan over the filtered notes: a KNN over everything could miss them all.
            where, params = filter_sql(filters)
            rows = self._all(
                f"""SELECT v.rowid, c.note_rowid, vec_distance_cosine(v.embedding, ?) AS d
                    FROM {table} v JOIN chunks c ON c.rowid = v.rowid
                    JOIN notes n ON n.rowid = c.note_rowid
                    WHERE {where} ORDER BY d LIMIT ?""",
                (blob, *params, k),
            )
        else:
            rows = self._all(
                f"""SELECT v.rowid, c.note_rowid, v.distance FROM {table} v
                    JOIN chunks c ON c.rowid = v.rowid
                    WHERE v.embedding MATCH ? AND k = ? ORDER BY v.distance""",
                (blob, k),
            )
        # A zero vector (text the model has no tokens for) has no cosine: no match.
        return [ChunkHit(r[0], r[1], 1.0 - r[2]) for r in rows if r[2] is not None]

    def pending_chunks(
        self, limit: int, tier: str = INSTANT, *, leads: LeadsFirst | None = None
    ) -> list[PendingChunk]:
        """Chunks waiting for the tier's vectors; the newest first for the strong tier (a
        note just saved or edited comes before older ones). With `leads`, the notes' lead
        chunks (ordinal 0) past `leads.past` first, then the others.

        Each part walks the tier's partial index of pending chunks in key order from its
        start (or from `leads.past`) and checks the ordinal, stopping at `limit` rows: no
        sort. Without `past`, the leads part would walk again, each batch, over every
        pending chunk newer than the leads left: ~20 CPU-ms a batch, 22 CPU-s over
        cpp-docs' backlog, against 0.25 with it (docs/benchmarks.md, "Leads first")."""
        return pending_in_order(
            lambda where, params, n, lead: self._pending(where, params, tier, n, lead),
            _tier(tier).state,
            tier,
            limit,
            leads,
            "?",
        )

    def _pending(
        self, where: str, params: tuple, tier: str, limit: int, lead: bool = False
    ) -> list[PendingChunk]:
        order = "c.rowid DESC" if tier == STRONG else "c.rowid"
        rows = self._all(
            f"""SELECT c.rowid, c.text_hash, c.heading_path, c.text FROM chunks c
               WHERE {where} ORDER BY {order} LIMIT ?""",
            (*params, limit),
        )
        return [PendingChunk(r[0], r[1], f"{r[2]}\n\n{r[3]}", lead) for r in rows]

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for start in range(0, len(hashes), 500):
            part = list(hashes[start : start + 500])
            marks = ",".join("?" * len(part))
            rows = self._all(
                f"SELECT text_hash, vector FROM embed_cache "
                f"WHERE model = ? AND text_hash IN ({marks})",
                (model, *part),
            )
            out.update({r[0]: r[1] for r in rows})
        return out

    # -- summaries -----------------------------------------------------------------------

    def pending_summaries(self, after: int, limit: int) -> list[PendingSummary]:
        """Notes waiting for an LLM summary, by rowid after `after` (one pass never meets a
        note twice, even one that is re-queued meanwhile)."""
        rows = self._all(
            """SELECT rowid, path, title, version FROM notes
               WHERE summary_state = 1 AND rowid > ? ORDER BY rowid LIMIT ?""",
            (after, limit),
        )
        return [PendingSummary(r[0], r[1], r[2], r[3]) for r in rows]

    # -- tests -----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, list[tuple]]:
        """Everything a full reindex must reproduce, in a comparable form (tests use it)."""
        notes = self._all(
            "SELECT path, id, title, content_hash, version, summary, lead, created, updated, "
            "aliases, sort_time FROM notes ORDER BY path"
        )
        chunks = self._all(
            "SELECT n.path, c.ordinal, c.heading_path, c.text FROM chunks c "
            "JOIN notes n ON n.rowid = c.note_rowid ORDER BY n.path, c.ordinal"
        )
        links = self._all(
            "SELECT n.path, l.ordinal, l.target, l.heading, l.alias, l.embed, t.path "
            "FROM links l JOIN notes n ON n.rowid = l.note_rowid "
            "LEFT JOIN notes t ON t.rowid = l.target_rowid ORDER BY n.path, l.ordinal"
        )
        tags = self._all(
            "SELECT n.path, t.tag FROM tags t JOIN notes n ON n.rowid = t.note_rowid "
            "ORDER BY n.path, t.tag"
        )
        # What bm25() weighs words with: rows and words per column of each FTS5 table.
        text = [(table, *totals.stored(self.conn, table)) for table in totals.TABLES]
        return {"notes": notes, "chunks": chunks, "links": links, "tags": tags, "text": text}


class Writes(Reads):
    """Queries that change the index. Only ever on the write connection, inside
    `SqliteIndex.transaction()`."""

    def __init__(
        self, conn: Connection, owner: object | None = None, memo: dict | None = None
    ) -> None:
        super().__init__(conn, owner, memo)
        # [rows, words per column] deleted from each FTS5 table: taken off its totals
        # before COMMIT (index/sqlite/totals.py).
        self._gone = totals.nothing_gone()
        # The chunk rowids of the notes this transaction wrote, in ordinal order: a pass
        # that stores parse workers' vectors asks for them right after (chunk_keys).
        self._written: dict[int, list[int]] = {}

    def finish(self) -> None:
        """What the transaction owes before its COMMIT: FTS5's totals without the rows it
        deleted, as a fresh index of the same files has them."""
        totals.subtract(self.conn, self._gone)
        self._gone = totals.nothing_gone()

    def _delete_text_rows(self, table: str, rowids: Sequence[int]) -> None:
        """Rows out of an FTS5 table, their sizes noted for `finish`."""
        gone = totals.sizes(self.conn, table, rowids)
        marks = ",".join("?" * len(rowids))
        self._run(f"DELETE FROM {table} WHERE rowid IN ({marks})", list(rowids))
        self._gone[table] = [a + b for a, b in zip(self._gone[table], gone, strict=True)]

    def _run(self, sql: str, params: Sequence[object] = ()) -> object:
        return self.conn.execute(sql, params)  # type: ignore[attr-defined]

    def _many(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        self.conn.executemany(sql, rows)  # type: ignore[attr-defined]

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self._run("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self._run("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- notes ---------------------------------------------------------------------------

    def touch_note(self, rowid: int, mtime_ns: int, size: int, mtime_iso: str) -> None:
        """Same bytes, new stat. A note without a frontmatter date sorts by its mtime, so
        its sort time follows the touch, as a rebuild would set it."""
        self._run(
            "UPDATE notes SET mtime_ns = ?, size = ?, sort_time = COALESCE(updated, ?) "
            "WHERE rowid = ?",
            (mtime_ns, size, mtime_iso, rowid),
        )

    def set_note_id(self, path: str, note_id: str) -> None:
        self._run("UPDATE notes SET id = ? WHERE path = ?", (note_id, path))

    def _drop_note_parts(self, rowid: int) -> None:
        self._written.pop(rowid, None)
        chunk_ids = [
            r[0] for r in self._all("SELECT rowid FROM chunks WHERE note_rowid = ?", (rowid,))
        ]
        if chunk_ids:
            self._delete_text_rows("chunks_fts", chunk_ids)
            for tier in TIERS.values():
                if self.has_vector_table(tier.name):
                    # One rowid at a time: vec0 answers `rowid IN (...)` by reading every
                    # vector (11.7 ms for a 6-chunk note on cpp-docs' 34k; 0.1 this way).
                    self._many(
                        f"DELETE FROM {tier.table} WHERE rowid = ?", [(r,) for r in chunk_ids]
                    )
                    self.bump_vector_epoch(tier.name)
            self._run("DELETE FROM chunks WHERE note_rowid = ?", (rowid,))
        self._delete_text_rows("notes_fts", [rowid])
        self._run("DELETE FROM tags WHERE note_rowid = ?", (rowid,))
        self._run("DELETE FROM aliases WHERE note_rowid = ?", (rowid,))
        self._run("DELETE FROM links WHERE note_rowid = ?", (rowid,))

    def upsert_note(
        self,
        note: NoteRow,
        chunks: Sequence[ChunkRow],
        tags: Iterable[str],
        links: Sequence[LinkRow],
    ) -> int:
        """Replace everything stored for note.path; returns its rowid. Link targets are left
        unresolved: the caller re-resolves the batch's keys before it commits."""
        row = self._one("SELECT rowid FROM notes WHERE path = ?", (note.path,))
        values = (
            note.id,
            note.claimed_id,
            note.title,
            note.summary,
            note.lead,
            note.created,
            note.updated,
            note.sort_time,
            note.folder,
            note.stem_key,
            note.path_key,
            json.dumps(list(note.aliases), ensure_ascii=False),
            note.mtime_ns,
            note.size,
            note.content_hash,
            note.body_hash,
            note.version,
            1 if note.summary_pending else 0,
            note.lang,
        )
        if row is not None:
            rowid = row[0]
            self._drop_note_parts(rowid)
            self._run(
                """UPDATE notes SET id=?, claimed_id=?, title=?, summary=?, lead=?, created=?,
                   updated=?, sort_time=?, folder=?, stem_key=?, path_key=?, aliases=?,
                   mtime_ns=?, size=?, content_hash=?, body_hash=?, version=?, summary_state=?,
                   lang=?, llm_summary=NULL WHERE rowid=?""",
                (*values, rowid),
            )
        else:
            cur = self._run(
                """INSERT INTO notes(id, claimed_id, title, summary, lead, created, updated,
                   sort_time, folder, stem_key, path_key, aliases, mtime_ns, size, content_hash,
                   body_hash, version, summary_state, lang, path)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (*values, note.path),
            )
            rowid = cur.lastrowid  # type: ignore[attr-defined]
        if note.summary_pending:
            # The same body was summarised by the same model before (a reindex, a moved note,
            # a frontmatter-only edit): reuse it instead of asking the LLM again.
            cached = self._one(
                "SELECT summary FROM summary_cache WHERE model = ? AND body_hash = ?",
                (self.get_meta("summary_model") or "", note.body_hash),
            )
            if cached is not None:
                self._run(
                    "UPDATE notes SET llm_summary = ?, summary_state = 0 WHERE rowid = ?",
                    (cached[0], rowid),
                )
        if note.fts is not None:
            self._run(
                "INSERT INTO notes_fts(rowid, title, headings, body) VALUES (?,?,?,?)",
                (rowid, *note.fts),
            )
        keys = []
        for c in chunks:
            cur = self._run(
                """INSERT INTO chunks(note_rowid, ordinal, heading_path, text, text_hash, tokens)
                   VALUES (?,?,?,?,?,?)""",
                (rowid, c.ordinal, c.heading_path, c.text, c.text_hash, c.tokens),
            )
            keys.append(cur.lastrowid)  # type: ignore[attr-defined]
            self._run(
                "INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (?,?,?,?)",
                (keys[-1], c.fts_title, c.fts_headings, c.fts_body),
            )
        ordinals = [c.ordinal for c in chunks]
        self._written[rowid] = [k for _, k in sorted(zip(ordinals, keys, strict=True))]
        self._many(
            "INSERT OR IGNORE INTO tags(note_rowid, tag) VALUES (?, ?)", [(rowid, t) for t in tags]
        )
        self._many(
            "INSERT OR IGNORE INTO aliases(note_rowid, alias_key) VALUES (?, ?)",
            [(rowid, a.lower()) for a in note.aliases],
        )
        self._many(
            """INSERT INTO links(note_rowid, ordinal, target, target_key, heading, alias, embed)
               VALUES (?,?,?,?,?,?,?)""",
            [
                (rowid, i, ln.target, ln.target.lower(), ln.heading, ln.alias, int(ln.embed))
                for i, ln in enumerate(links)
            ],
        )
        return rowid

    def chunk_keys(self, rowid: int) -> list[int]:
        written = self._written.get(rowid)
        if written is not None:  # written by this transaction: no read needed
            return list(written)
        rows = self._all("SELECT rowid FROM chunks WHERE note_rowid = ? ORDER BY ordinal", (rowid,))
        return [r[0] for r in rows]

    def delete_note(self, rowid: int) -> None:
        self._drop_note_parts(rowid)
        self._run(
            "INSERT INTO gone_notes(id, content_hash, at) "
            f"SELECT id, content_hash, {NOW_SQL} FROM notes WHERE rowid = ?",
            (rowid,),
        )
        self._run("DELETE FROM notes WHERE rowid = ?", (rowid,))

    def redirect_moved(self, note_id: str, content_hash: str) -> None:
        """A note just added with the bytes of one removed lately was moved: its old id
        (a derived id changes with the path) now leads here. Redirects are a convenience
        for ids models kept; a full rebuild may drop them.

        Reads first, and writes only when there is something to expire or match: a DELETE
        opens a statement savepoint, on which FTS5 flushes its pending rows; one per added
        note cost 1.5 s of the writer's 6 s on a cold cpp-docs index."""
        if self._one("SELECT 1 FROM gone_notes LIMIT 1") is None:
            return
        if self._one(f"SELECT 1 FROM gone_notes WHERE at < {NOW_SQL} - 86400 LIMIT 1"):
            self._run(f"DELETE FROM gone_notes WHERE at < {NOW_SQL} - 86400")
        row = self._one(
            "SELECT rowid, id FROM gone_notes WHERE content_hash = ? ORDER BY at DESC LIMIT 1",
            (content_hash,),
        )
        if row is None:
            return
        self._run("DELETE FROM gone_notes WHERE rowid = ?", (row[0],))
        if row[1] != note_id:
            self._run(
                "INSERT OR REPLACE INTO id_redirects(old_id, new_id) VALUES (?, ?)",
                (row[1], note_id),
            )
            self._run("DELETE FROM id_redirects WHERE old_id = ?", (note_id,))

    def put_off_indexes(self) -> None:
        """A first index of many notes is under way: the secondary indexes it builds at its
        end (schema.PUT_OFF) go until make_indexes."""
        for name in PUT_OFF:
            self._run(f"DROP INDEX IF EXISTS {name}")

    def make_indexes(self) -> None:
        """Every index of the schema that is missing, made now (from sorted keys)."""
        for sql in missing_indexes(r[0] for r in self._all(INDEX_NAMES)):
            self._run(sql)

    def check_text_index(self) -> None:
        """FTS5's own integrity check; raises (IndexDamaged, through the transaction) when
        its pages are damaged, which a search would otherwise meet as wrong answers."""
        for table in ("chunks_fts", "notes_fts"):
            self._run(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 0)")

    def reset_text_index(self) -> None:
        """The damaged full-text tables, dropped and made anew (empty): the caller rebuilds."""
        from vault_brain.index.sqlite.schema import FTS_TABLES

        for name, create in FTS_TABLES.items():
            self._run(f"DROP TABLE IF EXISTS {name}")
            self._run(create)
        self._gone = totals.nothing_gone()

    def forget_text_index(self) -> None:
        """Where the damaged full-text tables cannot be dropped (their own b-tree pages are
        damaged, and DROP walks them to free them): take them out of the schema without
        reading a page, then make them anew (empty: the caller rebuilds). The damaged pages
        stay in the file unused until a VACUUM; the new tables change the schema version,
        so every connection, in any process, reads the new schema before its next query."""
        from vault_brain.index.sqlite.schema import FTS_TABLES

        shadows = ("", "_data", "_idx", "_docsize", "_config", "_content")
        names = [name + part for name in FTS_TABLES for part in shadows]
        self._run("PRAGMA writable_schema = ON")
        try:
            marks = ",".join("?" * len(names))
            self._run(f"DELETE FROM sqlite_schema WHERE name IN ({marks})", names)
        finally:
            self._run("PRAGMA writable_schema = RESET")  # off, and the schema read anew
        for create in FTS_TABLES.values():
            self._run(create)
        self._gone = totals.nothing_gone()

    def clear_notes(self) -> None:
        """Every note, chunk, link and vector gone, caches kept: a full rebuild then costs
        what a first index costs, and re-embeds nothing it has embedded before."""
        for table in ("chunks_fts", "notes_fts"):
            self._run(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        self._gone = totals.nothing_gone()  # delete-all zeroes the totals itself
        self._written.clear()
        for tier in TIERS.values():
            if self.has_vector_table(tier.name):
                self._run(f"DELETE FROM {tier.table}")
                self.bump_vector_epoch(tier.name)
        for table in ("links", "tags", "aliases", "chunks", "notes", "gone_notes"):
            self._run(f"DELETE FROM {table}")

    def resolve_links(self, keys: Iterable[str], note_rowids: Iterable[int] = ()) -> int:
        """Re-resolve every link whose target is one of `keys`, and every link of the notes
        `note_rowids`; returns how many links changed. Resolution depends only on the notes
        the index holds, so doing this for every key a change touched gives what a full
        rebuild gives."""
        # Most keys of a note are never linked: only the ones some link uses are resolved.
        present = self._link_keys_where("target_key", sorted(set(keys)))
        present |= self._link_keys_where("note_rowid", list(note_rowids))
        # Many keys (a first index, a big rename): one pass over the notes in memory beats
        # a query per key (the path rule's LIKE scans every note).
        resolve = self.key_resolver() if len(present) > BATCH_RESOLVE else self.resolve_key
        changed = 0
        for key in sorted(present):
            target = resolve(key)
            cur = self._run(
                "UPDATE links SET target_rowid = ? WHERE target_key = ? AND target_rowid IS NOT ?",
                (target, key, target),
            )
            changed += cur.rowcount  # type: ignore[attr-defined]
        return changed

    def resolve_every_link(self) -> int:
        """Re-resolve every link of the index (after a pass that was cut short)."""
        keys = {r[0] for r in self._all("SELECT DISTINCT target_key FROM links")}
        return self.resolve_links(keys)

    def _link_keys_where(self, column: str, values: Sequence[object]) -> set[str]:
        """The distinct link target keys of links whose `column` is one of `values`."""
        found: set[str] = set()
        for start in range(0, len(values), 500):
            part = list(values[start : start + 500])
            marks = ",".join("?" * len(part))
            sql = f"SELECT DISTINCT target_key FROM links WHERE {column} IN ({marks})"
            found |= {r[0] for r in self._all(sql, part)}
        return found

    # -- vectors -------------------------------------------------------------------------

    def bump_vector_epoch(self, tier: str = INSTANT) -> None:
        """Every change to a vector table moves its counter: in-memory copies reload."""
        self._run(
            "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (f"{_tier(tier).meta}_epoch",),
        )

    def reset_vectors(self, model: str, dim: int, tier: str = INSTANT) -> None:
        """A new model for the tier: drop its old vectors (two models never mix) and queue
        every chunk for it again."""
        t = _tier(tier)
        self._run(f"DROP TABLE IF EXISTS {t.table}")
        self._run(
            f"CREATE VIRTUAL TABLE {t.table} USING vec0("
            f"embedding float[{int(dim)}] distance_metric=cosine)"
        )
        self._run(f"UPDATE chunks SET {t.state} = 0")
        self.bump_vector_epoch(tier)
        self.set_meta(f"{t.meta}_model", model)
        self.set_meta(f"{t.meta}_dim", str(dim))

    def store_vectors(
        self,
        model: str,
        items: Sequence[tuple[int, str, bytes]],
        tier: str = INSTANT,
        *,
        cache: bool = True,
    ) -> int:
        """items: (chunk rowid, text hash, float32 bytes); returns how many were attached."""
        t = _tier(tier)
        if cache:
            self.cache_vectors(model, ((h, v) for _, h, v in items))
        rowids = [r for r, _, _ in items]
        marks = ",".join("?" * len(rowids))
        # Only chunks that still exist, unchanged and pending (a note may have changed).
        live = {
            (r[0], r[1])
            for r in self._all(
                f"SELECT rowid, text_hash FROM chunks WHERE {t.state} = 0 AND rowid IN ({marks})",
                rowids,
            )
        }
        rows = [(r, v) for r, h, v in items if (r, h) in live]
        self._many(f"INSERT OR REPLACE INTO {t.table}(rowid, embedding) VALUES (?, ?)", rows)
        self._many(f"UPDATE chunks SET {t.state} = 1 WHERE rowid = ?", [(r,) for r, _ in rows])
        if rows:
            self.bump_vector_epoch(tier)
        return len(rows)

    def cache_vectors(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        """Into the embedding cache in text-hash order: its (model, text_hash) index takes
        them as appends, where hashes in chunk order touch pages all over it. A cold index's
        parse vectors go in a few such batches (index/sync.py): per transaction, the cache's
        index pages were written again every time (35k vectors of cpp-docs: ~90 of the
        ~690 MB a cold instant index wrote)."""
        rows = dict(items)  # a later vector of a hash wins, as INSERT OR REPLACE in order
        self._many(
            "INSERT OR REPLACE INTO embed_cache(model, text_hash, vector) VALUES (?, ?, ?)",
            [(model, h, rows[h]) for h in sorted(rows)],
        )

    # -- summaries -----------------------------------------------------------------------

    def set_llm_summary(self, rowid: int, version: str, summary: str, model: str = "") -> bool:
        """Store a summary of `version` of the note, take it off the queue and remember it
        by (model, body); False (nothing stored) when the note has changed or gone since."""
        cur = self._run(
            """UPDATE notes SET llm_summary = ?, summary_state = 0
               WHERE rowid = ? AND version = ? AND summary_state = 1""",
            (summary, rowid, version),
        )
        if cur.rowcount != 1:  # type: ignore[attr-defined]
            return False
        self._run(
            """INSERT OR REPLACE INTO summary_cache(model, body_hash, summary)
               SELECT ?, body_hash, ? FROM notes WHERE rowid = ?""",
            (model, summary, rowid),
        )
        return True

    def queue_all_summaries(self) -> int:
        """Queue every note without a frontmatter summary (a new summarizer)."""
        cur = self._run(
            "UPDATE notes SET summary_state = 1 WHERE summary = '' AND summary_state = 0"
        )
        return cur.rowcount  # type: ignore[attr-defined]
