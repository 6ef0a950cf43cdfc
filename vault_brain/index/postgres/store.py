"""Named queries over one vault's schema: the Postgres backend's answers to the port.

The same questions as index/sqlite/store.py asks of SQLite, in Postgres's SQL: `Reads`
answers every read role of index/port.py on one REPEATABLE READ snapshot, `Writes` (a
`Reads` too) every write role inside one transaction of `PostgresIndex.transaction()`.
Full text is ranked by index/postgres/fulltext.py's BM25; vectors are pgvector columns
with an HNSW index (exact scans where a vault is small or a filter narrows it).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from vault_brain.index.links import link_keys
from vault_brain.index.postgres import fulltext
from vault_brain.index.postgres.fulltext import Phrase
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
from vault_brain.index.text import languages_of

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")


TIERS = make_tiers("vectors_instant", "vectors_strong")
BATCH_RESOLVE = 50
# Up to this many vectors a KNN is an exact scan (the same hits as SQLite's); above, HNSW.
EXACT_VECTORS = 20_000
# HNSW's candidate list: this many a hit asked for (hnsw.ef_search, 40 to 1,000).
HNSW_EF_PER_HIT = 2.0
# The query's noise level (median and spread of its cosines) from at most this many.
NOISE_SAMPLE = 20_000
MAD_TO_SIGMA = 1.4826
NOW_SQL = "extract(epoch from clock_timestamp())"


def filter_sql(filters: Filters, alias: str = "n") -> tuple[str, list[object]]:
    """A WHERE fragment over notes (alias n) and its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if filters.folder:
        folder = filters.folder.strip("/")
        parts.append(f"(lower({alias}.folder) = lower(%s) OR {alias}.folder ILIKE %s)")
        params += [folder, like_prefix(folder) + "/%"]
    for tag in filters.tags:
        tag = tag.lower().lstrip("#")
        parts.append(
            f"EXISTS (SELECT 1 FROM tags t WHERE t.note_rowid = {alias}.rowid "
            f"AND (t.tag = %s OR t.tag LIKE %s))"
        )
        params += [tag, like_prefix(tag) + "/%"]
    if filters.since:
        parts.append(f"{alias}.sort_time >= %s")
        params.append(filters.since)
    if filters.until:
        parts.append(f"{alias}.sort_time <= %s")
        params.append(filters.until)
    return (" AND ".join(parts) or "true"), params


def _tier(name: str) -> Tier:
    return tier_named(TIERS, name)


class Reads:
    """Queries that only read, on one snapshot (a connection of the reader pool)."""

    def __init__(
        self,
        conn: Any,
        owner: Any,
        memo: Callable[[str, Callable[[], T]], T] | None,
        begin: str | tuple[str, ...] | None = None,
    ):
        self.conn = conn
        # The snapshot's BEGIN, sent with the first query (one round trip for both; a read
        # that asks nothing, its answers remembered, sends neither it nor a ROLLBACK).
        self._begin = begin
        self._owner = owner  # the PostgresIndex
        self._memo = memo  # remembers values until the index changes (LISTEN/NOTIFY)
        self._phrase_memo: dict[tuple, list[Phrase]] = {}  # one search asks up to 3 times
        self._df_memo: dict[tuple, dict[str, dict[str, int]]] = {}
        # The forms each note of the last notes ranking holds, by that ranking's forms
        # (`_keep_held`): `text_matches` answers from it without reading the notes again.
        self._held: tuple[tuple[str, ...], dict[int, list[int]]] | None = None

    def per_version(self, name: str, compute: Callable[[], T]) -> T:
        """compute(), remembered until any process commits to this vault's index (the
        index's change notifications say when); computed afresh where nothing listens."""
        if self._memo is None:
            return compute()
        return self._memo(name, compute)

    def _execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        if self._begin is None:
            return self.conn.execute(sql, params)
        begin = (self._begin,) if isinstance(self._begin, str) else self._begin
        self._begin = None
        if ";" in sql:  # several statements (no parameters, no rows): one simple query
            return self.conn.execute("; ".join((*begin, sql)))
        with self.conn.pipeline():
            for statement in begin:
                self.conn.execute(statement)
            cursor = self.conn.execute(sql, params)
        return cursor

    def export_snapshot(self) -> str:
        """This read's snapshot, named for another connection to read it too (`SET
        TRANSACTION SNAPSHOT`, PostgresIndex.beside); valid while this read lasts."""
        return self._one("SELECT pg_export_snapshot()")[0]  # type: ignore[index]

    def _one(self, sql: str, params: Sequence[object] = ()) -> tuple | None:
        return self._execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        return self._execute(sql, params).fetchall()

    # -- meta ----------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = %s", (key,))
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
        rows = self._all(
            "SELECT path, rowid, mtime_ns, size, content_hash FROM notes "
            "WHERE path = %s OR (path >= %s AND path < %s)",
            (rel, rel + "/", rel + "0"),
        )
        return {r[0]: StoredStat(r[1], r[2], r[3], r[4]) for r in rows}

    def load_stat(self, path: str) -> StoredStat | None:
        row = self._one(
            "SELECT rowid, mtime_ns, size, content_hash FROM notes WHERE path = %s", (path,)
        )
        return StoredStat(*row) if row else None

    def id_holder(self, note_id: str) -> str | None:
        row = self._one("SELECT path FROM notes WHERE id = %s", (note_id,))
        return row[0] if row else None

    def id_of(self, path: str) -> str | None:
        row = self._one("SELECT id FROM notes WHERE path = %s", (path,))
        return row[0] if row else None

    def first_claimant(self, note_id: str) -> str | None:
        row = self._one(
            "SELECT path FROM notes WHERE claimed_id = %s ORDER BY path LIMIT 1", (note_id,)
        )
        return row[0] if row else None

    def keys_of(self, rowid: int) -> set[str]:
        row = self._one("SELECT path_key, aliases FROM notes WHERE rowid = %s", (rowid,))
        if row is None:
            return set()
        return link_keys(row[0], json.loads(row[1] or "[]"))

    def _first_note(self, where: str, params: Sequence[object], order: str = "") -> NoteInfo | None:
        order_by = f" ORDER BY {order}" if order else ""
        row = self._one(f"SELECT {NOTE_COLUMNS} FROM notes n {where}{order_by} LIMIT 1", params)
        return note_info(row) if row else None

    def note_by_id(self, note_id: str) -> NoteInfo | None:
        return self._first_note("WHERE n.id = %s", (note_id,))

    def note_by_path(self, path: str) -> NoteInfo | None:
        return self._first_note("WHERE n.path = %s", (path,)) or self._first_note(
            "WHERE lower(n.path) = lower(%s)", (path,), "n.path"
        )

    def notes_by_title(self, title: str, limit: int) -> list[NoteInfo]:
        return self._notes("WHERE lower(n.title) = lower(%s)", (title,), limit)

    def notes_by_alias(self, alias: str, limit: int) -> list[NoteInfo]:
        return self._notes(
            "JOIN aliases a ON a.note_rowid = n.rowid WHERE a.alias_key = %s",
            (alias.lower(),),
            limit,
        )

    def notes_by_stem(self, stem: str, limit: int) -> list[NoteInfo]:
        return self._notes("WHERE n.stem_key = %s", (stem.lower(),), limit)

    def _notes(self, where: str, params: Sequence[object], limit: int) -> list[NoteInfo]:
        rows = self._all(
            f"SELECT DISTINCT length(n.path), {NOTE_COLUMNS} FROM notes n {where} "
            "ORDER BY length(n.path), n.path LIMIT %s",
            (*params, limit),
        )
        return [note_info(r[1:]) for r in rows]

    def redirect(self, old_id: str) -> str | None:
        row = self._one("SELECT new_id FROM id_redirects WHERE old_id = %s", (old_id,))
        return row[0] if row else None

    def names(self) -> list[tuple[str, int]]:
        rows = self._all("SELECT title, rowid FROM notes")
        rows += self._all("SELECT alias_key, note_rowid FROM aliases")
        return [(r[0], r[1]) for r in rows]

    def folders(self) -> list[str]:
        rows = self._all("SELECT DISTINCT folder FROM notes WHERE folder != ''")
        return with_parents(r[0] for r in rows)

    def folder_exists(self, folder: str) -> bool:
        folder = folder.strip("/")
        row = self._one(
            "SELECT 1 FROM notes WHERE lower(folder) = lower(%s) OR folder ILIKE %s LIMIT 1",
            (folder, like_prefix(folder) + "/%"),
        )
        return row is not None

    def notes_by_rowids(self, rowids: Sequence[int]) -> dict[int, NoteInfo]:
        if not rowids:
            return {}
        rows = self._all(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.rowid = ANY(%s)", (list(rowids),)
        )
        return {r[0]: note_info(r) for r in rows}

    def note_with_body(self, body_hash: str) -> NoteInfo | None:
        return self._first_note("WHERE n.body_hash = %s", (body_hash,), "n.path")

    def list_notes(
        self, filters: Filters, limit: int, after: str | None = None
    ) -> tuple[list[NoteInfo], str | None]:
        where, params = filter_sql(filters)
        if after is not None:
            sort_time, rowid = decode_cursor(after)
            where += " AND (n.sort_time, n.rowid) < (%s, %s)"
            params += [sort_time, rowid]
        rows = self._all(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE {where} "
            f"ORDER BY n.sort_time DESC, n.rowid DESC LIMIT %s",
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
        row = self._one(
            "SELECT count(*), count(*) FILTER (WHERE vec_state = 0), "
            "count(*) FILTER (WHERE strong_state = 0) FROM chunks"
        )
        chunks, pending, strong = row  # type: ignore[misc]
        notes, summaries = self._one(  # type: ignore[misc]
            "SELECT count(*), count(*) FILTER (WHERE summary_state = 1) FROM notes"
        )
        return Counts(notes, chunks, chunks - pending, pending, summaries, chunks - strong)

    def strong_backlog(self, at_most: int) -> int:
        return self._one(
            "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE strong_state = 0 LIMIT %s) s",
            (at_most + 1,),
        )[0]  # type: ignore[index]

    def strong_covers(self, share: float) -> bool:
        chunks = self.chunk_count()
        if not chunks:
            return False
        allowed = math.floor(chunks - share * chunks)
        return self.strong_backlog(allowed) <= allowed

    def chunk_count(self) -> int:
        return self._one("SELECT rows FROM fts_stats WHERE kind = 'chunks'")[0]  # type: ignore[index]

    # -- links ---------------------------------------------------------------------------

    def resolve_key(self, key: str) -> int | None:
        if "/" in key:
            row = self._one(
                "SELECT rowid FROM notes WHERE stem_key = %s "
                "AND (path_key = %s OR path_key LIKE %s) "
                "ORDER BY length(path), path LIMIT 1",
                (key.rsplit("/", 1)[-1], key, "%/" + like_prefix(key)),
            )
        else:
            row = self._one(
                "SELECT rowid FROM notes WHERE stem_key = %s ORDER BY length(path), path LIMIT 1",
                (key,),
            )
        if row is None:
            row = self._one(
                "SELECT n.rowid FROM notes n JOIN aliases a ON a.note_rowid = n.rowid "
                "WHERE a.alias_key = %s ORDER BY n.path LIMIT 1",
                (key,),
            )
        return row[0] if row else None

    def key_resolver(self) -> Callable[[str], int | None]:
        return key_resolver(
            self._all("SELECT rowid, path, stem_key, path_key FROM notes"),
            self._all(
                "SELECT a.alias_key, n.path, n.rowid FROM aliases a "
                "JOIN notes n ON n.rowid = a.note_rowid"
            ),
        )

    def links_of(self, rowid: int) -> list[LinkInfo]:
        rows = self._all(
            "SELECT target, heading, alias, embed, target_rowid FROM links "
            "WHERE note_rowid = %s ORDER BY ordinal",
            (rowid,),
        )
        targets = self.notes_by_rowids(sorted({r[4] for r in rows if r[4] is not None}))
        return [
            LinkInfo(r[0], r[1], r[2], bool(r[3]), targets.get(r[4]) if r[4] else None)
            for r in rows
        ]

    def backlinks(self, rowid: int) -> list[NoteInfo]:
        rows = self._all(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.rowid IN "
            "(SELECT note_rowid FROM links WHERE target_rowid = %s AND note_rowid != %s) "
            "ORDER BY n.path",
            (rowid, rowid),
        )
        return [note_info(r) for r in rows]

    def related(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[NoteInfo]:
        """index/port.py's contract, in index/shared.py's order: link neighbours, then
        other notes by their best chunk against this note's mean vector (pgvector's avg
        over its chunks; the KNN of nearest_chunks)."""
        return related_notes(self, rowid, limit, tiers)

    def linked_notes(self, rowid: int, limit: int) -> list[int]:
        rows = self._all(
            """SELECT target_rowid FROM links WHERE note_rowid = %s
                   AND target_rowid IS NOT NULL AND target_rowid != %s
               GROUP BY target_rowid ORDER BY min(ordinal) LIMIT %s""",
            (rowid, rowid, limit),
        )
        return [r[0] for r in rows]

    def linking_notes(self, rowid: int, limit: int) -> list[int]:
        rows = self._all(
            """SELECT n.rowid FROM notes n WHERE n.rowid IN
                   (SELECT note_rowid FROM links WHERE target_rowid = %s AND note_rowid != %s)
               ORDER BY n.path LIMIT %s""",
            (rowid, rowid, limit),
        )
        return [r[0] for r in rows]

    def nearest_notes(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[int]:
        import numpy as np

        for tier in tiers:
            held = self.vectors_model(tier)
            if held is None:
                continue
            t = _tier(tier)
            row = self._one(
                f"SELECT avg(embedding), count(*) FROM {t.table} WHERE note_rowid = %s",
                (rowid,),
            )
            if row is None or not row[1]:
                continue
            held_mean = row[0].to_numpy() if hasattr(row[0], "to_numpy") else row[0]
            mean = np.asarray(held_mean, dtype=np.float32)  # pgvector's Vector
            return notes_near_mean(self, rowid, mean, int(row[1]), held[0], tier, limit)
        return []

    # -- full text -----------------------------------------------------------------------

    def note_languages(self) -> dict[str, int]:
        rows = self._all("SELECT lang, count(*) FROM notes GROUP BY lang")
        return {r[0]: r[1] for r in rows if r[0]}

    def vault_languages(self) -> tuple[tuple[str, ...], str | None]:
        return self.per_version(
            "vault_languages",
            lambda: languages_of(self.note_languages(), self.get_meta("text_languages")),
        )

    def rank_text(
        self, query: TextQuery, filters: Filters, *, notes: int, note_weight: float, evidence: int
    ) -> TextRanking:
        """The full-text question (index/port.py's TextSearch): BM25 in SQL
        (index/postgres/fulltext.py), notes then their chunks, mixed as on any backend
        (index/ranking.py)."""
        return rank_text(self, query, filters, notes, note_weight, evidence)

    def _stats(self, kind: str) -> tuple[int, float]:
        """(rows, mean words a row) of notes or chunks, remembered until the index changes."""

        def compute() -> tuple[int, float]:
            rows, words = self._one("SELECT rows, words FROM fts_stats WHERE kind = %s", (kind,))  # type: ignore[misc]
            return rows, (words / rows if rows else 1.0)

        return self.per_version(f"fts_stats:{kind}", compute)

    def _phrases(self, query: TextQuery, kind: str, rows: int) -> list[Phrase]:
        """A phrase per form of every query word (FTS5's shape), with its frequency among
        the notes' or the chunks' rows (remembered for this snapshot: a search asks for
        the notes' twice)."""
        key = (query.groups, kind, rows)
        if key not in self._phrase_memo:
            self._phrase_memo[key] = self._phrases_now(query, kind, rows)
        return self._phrase_memo[key]

    def _phrases_now(self, query: TextQuery, kind: str, rows: int) -> list[Phrase]:
        terms_table = "note_terms" if kind == "notes" else "chunk_terms"
        forms = [f for group in query.groups for f in group]
        df = self._plain_df(forms)[kind]
        out = []
        for form in forms:
            if form.endswith("*"):
                stem = fulltext.fold(form.rstrip("*"))
                terms = tuple(
                    r[0]
                    for r in self._all(
                        f"SELECT term FROM {terms_table} WHERE term >= %s AND term < %s "
                        "AND df > 0 ORDER BY df DESC LIMIT %s",
                        (stem, stem + "\U0010ffff", fulltext.PREFIX_TERMS),
                    )
                )
                count = (
                    self._one(
                        f"SELECT count(*) FROM {kind} WHERE tsv @@ %s::tsquery",
                        (fulltext.tsquery([form]),),
                    )[0]
                    if terms
                    else 0
                )  # type: ignore[index]
                out.append(Phrase(form, terms, True, count, fulltext.idf(rows, count)))
            else:
                term = fulltext.fold(form)
                count = df.get(term, 0)
                out.append(Phrase(form, (term,), False, count, fulltext.idf(rows, count)))
        return out

    def _plain_df(self, forms: Sequence[str]) -> dict[str, dict[str, int]]:
        """How many notes and how many chunks hold each plain (not prefix) form, both
        asked in one round trip (a search needs both) and kept for this snapshot."""
        plain = sorted({fulltext.fold(f) for f in forms if not f.endswith("*")})
        key = tuple(plain)
        if key not in self._df_memo:
            found: dict[str, dict[str, int]] = {"notes": {}, "chunks": {}}
            for kind, term, df in self._all(
                "SELECT 'notes', term, df FROM note_terms WHERE term = ANY(%s) UNION ALL "
                "SELECT 'chunks', term, df FROM chunk_terms WHERE term = ANY(%s)",
                (plain, plain),
            ):
                found[kind][term] = df
            self._df_memo[key] = found
        return self._df_memo[key]

    def _bm25(
        self,
        kind: str,
        query: TextQuery,
        limit: int,
        where: str = "true",
        params: Sequence[object] = (),
        join: str = "",
        within: Sequence[int] | None = None,
    ) -> list[tuple[int, int, float]]:
        """(row key, note key, BM25) of the best `limit` rows of `kind` (notes or chunks,
        alias r) that hold a form of the query and pass `where` (after `join`),
        best first; exact, through the MaxScore rounds of fulltext.essential_rounds."""
        rows, avgdl = self._stats(kind)
        phrases = [p for p in self._phrases(query, kind, rows) if p.terms]
        if not phrases or limit <= 0:
            return []
        terms, idfs, ids = fulltext.scoring_arrays(phrases)
        note = "r.rowid" if kind == "notes" else "r.note_rowid"
        source = kind
        rounds = fulltext.essential_rounds(phrases)
        if within is not None:
            return self._chunks_within(terms, idfs, ids, within, limit, avgdl)
        found: list[tuple[int, int, float]] = []
        for essential, rest in rounds:
            tsq = fulltext.tsquery(phrases[i].form for i in essential)
            sql = f"""
                WITH q AS (
                    SELECT * FROM unnest(%s::text[], %s::float8[], %s::int[]) AS q(term, idf, id)
                ), cand AS (
                    SELECT r.rowid, {note} AS note, r.tf, r.flen FROM {source} r {join}
                    WHERE r.tsv @@ %s::tsquery AND {where}
                ), hits AS (
                    SELECT c.rowid, c.note, c.flen, q.id, max(q.idf) AS idf,
                           sum((c.tf ->> q.term)::float8) AS w
                    FROM cand c JOIN q ON c.tf ? q.term
                    GROUP BY c.rowid, c.note, c.flen, q.id
                )
                SELECT rowid, note, sum(idf * w * {fulltext.K1 + 1} / (w + {fulltext.K1}
                    * ({1 - fulltext.B} + {fulltext.B} * flen / %s::float8))) AS s
                FROM hits GROUP BY rowid, note ORDER BY s DESC, rowid LIMIT %s"""
            found = [
                (r[0], r[1], r[2])
                for r in self._all(sql, (terms, idfs, ids, tsq, *params, avgdl, limit))
            ]
            if not rest or (len(found) >= limit and found[-1][2] > rest):
                break
        return found

    def _chunks_within(
        self,
        terms: list[str],
        idfs: list[float],
        ids: list[int],
        within: Sequence[int],
        limit: int,
        avgdl: float,
    ) -> list[tuple[int, int, float]]:
        """BM25 of the chunks of a few notes (a search's best): read by note, each chunk's
        word counts unpacked once (`|| '{}'` in a fence: otherwise every word looked up
        in them unpacks them again, half this query's time); no GIN, whose list for a
        common word may hold most of the vault."""
        sql = f"""
            WITH q AS (
                SELECT * FROM unnest(%s::text[], %s::float8[], %s::int[]) AS q(term, idf, id)
            ), hits AS (
                SELECT c.rowid, c.note_rowid AS note, c.flen, q.id, max(q.idf) AS idf,
                       sum((t.tf ->> q.term)::float8) AS w
                FROM chunks c CROSS JOIN LATERAL (SELECT c.tf || '{{}}'::jsonb AS tf OFFSET 0) t
                JOIN q ON t.tf ? q.term
                WHERE c.note_rowid = ANY(%s) GROUP BY c.rowid, c.note_rowid, c.flen, q.id
            )
            SELECT rowid, note, sum(idf * {fulltext.impact_sql("w", "flen", "%s")}) AS s
            FROM hits GROUP BY rowid, note ORDER BY s DESC, rowid LIMIT %s"""
        rows = self._all(sql, (terms, idfs, ids, list(within), avgdl, limit))
        return [(r[0], r[1], r[2]) for r in rows]

    def stale_impacts(self) -> float | None:
        """The notes' mean length now, if the postings' impacts were computed at one that
        differs by more than fulltext.AVGLEN_DRIFT; else None."""
        frozen = self.get_meta(fulltext.AVGLEN_META)
        rows, words = self._one("SELECT rows, words FROM fts_stats WHERE kind = 'notes'")  # type: ignore[misc]
        if frozen is None or not rows or not words:
            return None
        avglen = words / rows
        return avglen if abs(avglen / float(frozen) - 1) > fulltext.AVGLEN_DRIFT else None

    def search_text(self, query: TextQuery, filters: Filters, limit: int) -> list[ChunkHit]:
        """Chunks ranked by BM25 (higher is better)."""
        if not query:
            return []
        where, params = filter_sql(filters)
        join = "JOIN notes n ON n.rowid = r.note_rowid" if filters.active else ""
        hits = self._bm25("chunks", query, limit, where, params, join)
        return [ChunkHit(r, n, s) for r, n, s in hits]

    def search_text_notes(
        self, query: TextQuery, filters: Filters, limit: int
    ) -> list[tuple[int, float]]:
        """(note key, BM25) of the best `limit` notes, best first, from note_postings.
        Unfiltered: each word's best notes by impact (`_impact_ranked`); within filters,
        the exact ranking (`_exact_ranked`)."""
        if not query or limit <= 0:
            return []
        rows, avgdl = self._stats("notes")
        phrases = [p for p in self._phrases(query, "notes", rows) if p.terms]
        if not phrases:
            return []
        if filters.active:
            return self._exact_ranked(phrases, filters, limit, avgdl)
        return self._impact_ranked(phrases, limit, avgdl)

    def _impact_ranked(
        self, phrases: Sequence[Phrase], limit: int, avgdl: float, per_term: int | None = None
    ) -> list[tuple[int, float]]:
        """Impact-ordered postings: each query word's `per_term` notes where it weighs most
        (fulltext.POSTINGS_PER_TERM; a prefix form's words share it), ranked by what they
        add up to; then the best of them scored with every word (exact BM25, as
        `_exact_ranked`): a form whose notes were all read adds what was read, one that
        was cut short is looked up by key. The same ranking as the exact one whenever no
        word is held by more notes than it reads. One statement; each note's forms are
        kept for `text_matches` (`_keep_held`)."""
        k = per_term or fulltext.POSTINGS_PER_TERM
        terms, idfs, ids = fulltext.scoring_arrays(phrases)
        share = Counter(ids)
        ks = [k if share[i] == 1 else max(fulltext.MIN_PREFIX_POSTINGS, k // share[i]) for i in ids]
        whole = [phrases[i].df <= ks[j] for j, i in enumerate(ids)]  # every holder read
        cut = not all(whole)
        pool = max(limit * fulltext.RESCORE_FACTOR, fulltext.RESCORE_MIN) if cut else limit
        # The pool is chosen by each posting read weighed alone (one grouping of the rows
        # read, not one per form and then per note: a third of this query's time); its
        # notes are then scored exactly, a prefix form's words counted together. (Skipping
        # the lookups of notes a form's postings read already held saved no time.)
        part = fulltext.impact_sql("w", "flen", "%s")
        sql = f"""
            WITH q AS (
                SELECT * FROM unnest(%s::text[], %s::float8[], %s::int[], %s::int[], %s::bool[])
                    AS q(term, idf, id, k, whole)
            ), top AS MATERIALIZED (
                SELECT q.id, q.idf, q.whole, t.note, t.w, t.flen
                FROM q CROSS JOIN LATERAL (
                    SELECT p.note, p.w, p.flen FROM note_postings p
                    WHERE p.term = q.term ORDER BY p.imp DESC LIMIT q.k
                ) t
            ), pool AS (
                SELECT note FROM top GROUP BY note ORDER BY sum(idf * {part}) DESC, note LIMIT %s
            ), found AS (
                SELECT t.note, t.id, t.idf, t.w, t.flen FROM top t
                WHERE t.whole AND t.note IN (SELECT note FROM pool)
                UNION ALL
                SELECT p.note, x.id, x.idf, p.w, p.flen
                FROM pool c CROSS JOIN (SELECT * FROM q WHERE NOT q.whole) x
                CROSS JOIN LATERAL (
                    SELECT p.note, p.w, p.flen FROM note_postings p
                    WHERE p.note = c.note AND p.term = x.term OFFSET 0
                ) p
            ), hits AS (
                SELECT note, flen, id, max(idf) AS idf, sum(w) AS w
                FROM found GROUP BY note, flen, id
            )
            SELECT note, sum(idf * {part}) AS s, array_agg(id) FROM hits GROUP BY note
            ORDER BY s DESC, note LIMIT %s"""
        rows = self._all(sql, (terms, idfs, ids, ks, whole, avgdl, pool, avgdl, limit))
        self._keep_held(phrases, rows)
        return [(r[0], r[1]) for r in rows]

    def _exact_ranked(
        self, phrases: Sequence[Phrase], filters: Filters, limit: int, avgdl: float
    ) -> list[tuple[int, float]]:
        """Exact BM25 within filters: the rarest forms' notes are the candidates (MaxScore,
        fulltext.essential_rounds), each scored with every form by key lookups."""
        terms, idfs, ids = fulltext.scoring_arrays(phrases)
        where, params = filter_sql(filters, "r")
        if filters.active:
            final = f"FROM scored s JOIN notes r ON r.rowid = s.note WHERE {where}"
        else:
            final, params = "FROM scored s", []
        score = f"sum(idf * {fulltext.impact_sql('w', 'flen', '%s')})"
        found: list[tuple[int, float]] = []
        rows: list[tuple] = []
        for essential, rest in fulltext.essential_rounds(phrases):
            chosen = set(essential)
            flags = [ids[i] in chosen for i in range(len(terms))]
            if rest:
                source = """(SELECT DISTINCT p.note FROM q JOIN note_postings p ON p.term = q.term
                              WHERE q.essential) c CROSS JOIN q
                             JOIN note_postings p ON p.note = c.note AND p.term = q.term"""
            else:
                source = "q JOIN note_postings p ON p.term = q.term"
            sql = f"""
                WITH q AS (
                    SELECT * FROM unnest(%s::text[], %s::float8[], %s::int[], %s::bool[])
                        AS q(term, idf, id, essential)
                ), hits AS (
                    SELECT p.note, p.flen, q.id, max(q.idf) AS idf, sum(p.w) AS w
                    FROM {source} GROUP BY p.note, p.flen, q.id
                ), scored AS (
                    SELECT note, {score} AS s, array_agg(id) AS held FROM hits GROUP BY note
                )
                SELECT s.note, s.s, s.held {final} ORDER BY s.s DESC, s.note LIMIT %s"""
            rows = self._all(sql, (terms, idfs, ids, flags, avgdl, *params, limit))
            found = [(r[0], r[1]) for r in rows]
            if not rest or (len(found) >= limit and found[-1][1] > rest):
                break
        self._keep_held(phrases, rows)
        return found

    def _keep_held(self, phrases: Sequence[Phrase], rows: Sequence[tuple]) -> None:
        """Remember which forms each ranked note holds (rows: note, score, phrase numbers
        it holds), unless a prefix form stands for only its PREFIX_TERMS commonest words
        (a note may hold a rarer one: `text_matches` then asks the notes' text)."""
        if any(p.prefix and len(p.terms) >= fulltext.PREFIX_TERMS for p in phrases):
            self._held = None
            return
        self._held = (tuple(p.form for p in phrases), {r[0]: r[2] for r in rows})

    def search_text_within(
        self, query: TextQuery, note_rowids: Sequence[int], limit: int
    ) -> list[ChunkHit]:
        if not query or not note_rowids:
            return []
        hits = self._bm25("chunks", query, limit, within=note_rowids)
        return [ChunkHit(r, n, s) for r, n, s in hits]

    def text_stats(self, query: TextQuery) -> tuple[int, list[int]]:
        """(notes in the index, notes holding each group of the query): a group's count is
        its most frequent form's."""
        notes = self.per_version("notes", self.note_count)
        rows, _ = self._stats("notes")
        phrases = self._phrases(query, "notes", rows)
        counts = []
        i = 0
        for group in query.groups:
            best = 0
            for _ in group:
                p = phrases[i]
                i += 1
                if p.prefix:
                    best = max(best, self._max_df("note_terms", p.terms))
                else:
                    best = max(best, p.df)
            counts.append(best)
        return notes, counts

    def _max_df(self, table: str, terms: Sequence[str]) -> int:
        if not terms:
            return 0
        row = self._one(f"SELECT max(df) FROM {table} WHERE term = ANY(%s)", (list(terms),))
        return (row[0] or 0) if row else 0

    def text_matches(self, query: TextQuery, note_rowids: Sequence[int]) -> dict[int, set[int]]:
        """For each of these notes, which groups of the query its whole text holds."""
        found: dict[int, set[int]] = {}
        if not note_rowids:
            return found
        held = self._held_by(query, note_rowids)
        if held is not None:
            forms, by_note = held
            groups_of = [
                {g for g, group in enumerate(query.groups) if form in group} for form in forms
            ]
            for rowid in note_rowids:
                hold = set().union(*(groups_of[i] for i in by_note[rowid]))
                if hold:
                    found[rowid] = hold
            return found
        groups = [fulltext.tsquery(group) for group in query.groups]
        tests = ", ".join("tsv @@ %s::tsquery" for _ in groups)
        rows = self._all(
            f"SELECT rowid, {tests} FROM notes WHERE rowid = ANY(%s)",
            (*groups, list(note_rowids)),
        )
        for rowid, *holds in rows:
            held = {i for i, h in enumerate(holds) if h}
            if held:
                found[rowid] = held
        return found

    def _held_by(
        self, query: TextQuery, note_rowids: Sequence[int]
    ) -> tuple[tuple[str, ...], dict[int, list[int]]] | None:
        """(the forms, the numbers of those each note holds), known from this snapshot's
        notes ranking of the same query when it ranked all these notes; else None. A form
        a note holds is one of its words (note_postings and its tsvector hold the same
        words)."""
        if self._held is None:
            return None
        rows, _ = self._stats("notes")
        forms = tuple(p.form for p in self._phrases(query, "notes", rows) if p.terms)
        known, held = self._held
        if forms != known or not all(n in held for n in note_rowids):
            return None
        return known, held

    def chunks_of_notes(self, note_rowids: Sequence[int]) -> list[tuple[int, int, str, str]]:
        if not note_rowids:
            return []
        return [
            (r[0], r[1], r[2], r[3])
            for r in self._all(
                """SELECT c.note_rowid, c.rowid, c.text, n.lang FROM chunks c
                   JOIN notes n ON n.rowid = c.note_rowid
                   WHERE c.note_rowid = ANY(%s) ORDER BY c.rowid""",
                (list(note_rowids),),
            )
        ]

    def chunk_texts(self, chunk_rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
        if not chunk_rowids:
            return {}
        rows = self._all(
            "SELECT rowid, heading_path, text FROM chunks WHERE rowid = ANY(%s)",
            (list(chunk_rowids),),
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    # -- vectors -------------------------------------------------------------------------

    def has_vector_table(self, tier: str = INSTANT) -> bool:
        row = self._one(
            "SELECT 1 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
            "WHERE s.nspname = current_schema() AND c.relname = %s",
            (_tier(tier).table,),
        )
        return row is not None

    def vectors_model(self, tier: str = INSTANT) -> tuple[str, int] | None:
        """(model, dimension) of the tier's vectors, remembered until the index changes (a
        search asks it several times: a round trip each)."""

        def compute() -> tuple[str, int] | None:
            rows = dict(
                self._all(
                    "SELECT key, value FROM meta WHERE key = ANY(%s)",
                    ([f"{meta}_model", f"{meta}_dim"],),
                )
            )
            model, dim = rows.get(f"{meta}_model"), rows.get(f"{meta}_dim")
            if not (model and dim) or not self.has_vector_table(tier):
                return None
            return model, int(dim)

        meta = _tier(tier).meta
        return self.per_version(f"vectors_model:{tier}", compute)

    def vector_count(self, tier: str = INSTANT) -> int:
        """The tier's vectors: the planner's estimate where it has one (a count of a
        million rows takes longer than a search), else counted."""
        t = _tier(tier)
        row = self._one("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (t.table,))
        if row is not None and row[0] > 0:
            return int(row[0])
        return self._one(f"SELECT count(*) FROM {t.table}")[0]  # type: ignore[index]

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
        """The k chunks nearest to `vector` (cosine). Small vaults and filtered searches:
        an exact scan (the hits SQLite gives); beyond EXACT_VECTORS, pgvector's HNSW
        (ef_search at least 2k, iterative scans so a filter cannot empty it). With
        `noise`, the median and robust spread of the query's cosines over every chunk, or
        over an even sample of NOISE_SAMPLE of them on a larger vault."""
        import numpy as np

        t = _tier(tier)
        if self.vectors_model(tier) is None:
            return VectorHits([], 0.0, 0.0)
        q = np.asarray(vector, dtype=np.float32)
        if not np.any(q):
            return VectorHits([], 0.0, 0.0)
        count = self._vectors_up_to_exact(t)
        if filters.active:
            where, params = filter_sql(filters)
            rows = self._all(
                f"""SELECT v.chunk_rowid, v.note_rowid, (v.embedding <=> %s) + 0 AS d
                    FROM {t.table} v JOIN notes n ON n.rowid = v.note_rowid
                    WHERE {where} ORDER BY d, v.chunk_rowid LIMIT %s""",
                (q, *params, k),
            )
        elif count <= EXACT_VECTORS:
            rows = self._all(
                f"""SELECT chunk_rowid, note_rowid, (embedding <=> %s) + 0 AS d
                    FROM {t.table} ORDER BY d, chunk_rowid LIMIT %s""",
                (q, k),
            )
        else:
            self._execute(  # one round trip (no parameters: one simple query)
                f"SET LOCAL hnsw.ef_search = {max(40, min(1000, int(HNSW_EF_PER_HIT * k)))}; "
                "SET LOCAL hnsw.iterative_scan = relaxed_order"
            )
            rows = self._all(
                f"""SELECT chunk_rowid, note_rowid, d FROM (
                        SELECT chunk_rowid, note_rowid, embedding <=> %s AS d
                        FROM {t.table} ORDER BY embedding <=> %s LIMIT %s) s
                    ORDER BY d, chunk_rowid""",
                (q, q, k),
            )
        hits = [ChunkHit(r[0], r[1], 1.0 - r[2]) for r in rows if r[2] == r[2]]  # NaN: no match
        if noise and count > EXACT_VECTORS:
            count = self.vector_count(tier)
        median, spread = self._noise(t, q, count) if noise else (0.0, 0.0)
        return VectorHits(hits, median, spread)

    def _vectors_up_to_exact(self, t: Tier) -> int:
        """The tier's vectors counted up to EXACT_VECTORS + 1: only whether it is past that
        matters, remembered until the index changes (1.2 ms of server time at 300k)."""
        return self.per_version(
            f"vectors_past_exact:{t.name}",
            lambda: self._one(
                f"SELECT count(*) FROM (SELECT 1 FROM {t.table} LIMIT {EXACT_VECTORS + 1}) s"
            )[0],  # type: ignore[index]
        )

    def nearest_chunk_each(
        self, model: str, vectors: np.ndarray, *, tier: str = INSTANT
    ) -> list[ChunkHit | None]:
        """As nearest_chunks(k=1, no noise) would answer each row, in one statement: each
        row's own query (the same scan or HNSW walk, the same distance) in a lateral join,
        one round trip instead of two a row."""
        import numpy as np

        found: list[ChunkHit | None] = [None] * len(vectors)
        t = _tier(tier)
        if not len(vectors) or self.vectors_model(tier) is None:
            return found
        queries = np.asarray(vectors, dtype=np.float32)
        asked = [i for i in range(len(queries)) if np.any(queries[i])]  # zero: no match
        if not asked:
            return found
        if self._vectors_up_to_exact(t) <= EXACT_VECTORS:
            nearest = f"""SELECT chunk_rowid, note_rowid, (embedding <=> q.v) + 0 AS d
                FROM {t.table} ORDER BY d, chunk_rowid LIMIT 1"""
        else:
            self._execute(
                f"SET LOCAL hnsw.ef_search = {max(40, min(1000, int(HNSW_EF_PER_HIT)))}; "
                "SET LOCAL hnsw.iterative_scan = relaxed_order"
            )
            nearest = f"""SELECT chunk_rowid, note_rowid, d FROM (
                    SELECT chunk_rowid, note_rowid, embedding <=> q.v AS d
                    FROM {t.table} ORDER BY embedding <=> q.v LIMIT 1) s
                ORDER BY d, chunk_rowid"""
        rows = self._all(
            f"""SELECT q.i, h.chunk_rowid, h.note_rowid, h.d
                FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, i)
                CROSS JOIN LATERAL ({nearest}) h""",
            ([queries[i] for i in asked],),
        )
        for i, chunk, note, d in rows:
            if d == d:  # NaN: no match
                found[asked[i - 1]] = ChunkHit(chunk, note, 1.0 - d)
        return found

    def _noise(self, t: Tier, q: Any, count: int) -> tuple[float, float]:
        sample = ""
        if count > NOISE_SAMPLE:
            step = max(2, count // NOISE_SAMPLE)
            sample = f"WHERE mod(chunk_rowid, {step}) = 0"
        row = self._one(
            f"""WITH s AS (
                    SELECT 1 - (embedding <=> %s) AS c FROM {t.table} {sample}
                ), u AS (SELECT c FROM s WHERE c = c AND c != 0),
                m AS (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY c) AS med FROM u)
                SELECT m.med, percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(u.c - m.med))
                FROM u, m GROUP BY m.med""",
            (q,),
        )
        if row is None or row[0] is None:
            return 0.0, 0.0
        return float(row[0]), MAD_TO_SIGMA * float(row[1])

    def pending_chunks(
        self, limit: int, tier: str = INSTANT, *, leads: LeadsFirst | None = None
    ) -> list[PendingChunk]:
        """As SQLite's: the tier's pending chunks in key order (the strong tier: newest
        first); with `leads`, the notes' lead chunks (ordinal 0) past `leads.past` first."""
        return pending_in_order(
            lambda where, params, n, lead: self._pending(where, params, tier, n, lead),
            _tier(tier).state,
            tier,
            limit,
            leads,
            "%s",
        )

    def _pending(
        self, where: str, params: tuple, tier: str, limit: int, lead: bool = False
    ) -> list[PendingChunk]:
        order = "c.rowid DESC" if tier == STRONG else "c.rowid"
        rows = self._all(
            f"""SELECT c.rowid, c.text_hash, c.heading_path, c.text FROM chunks c
               WHERE {where} ORDER BY {order} LIMIT %s""",
            (*params, limit),
        )
        return [PendingChunk(r[0], r[1], f"{r[2]}\n\n{r[3]}", lead) for r in rows]

    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        rows = self._all(
            "SELECT text_hash, vector FROM embed_cache WHERE model = %s AND text_hash = ANY(%s)",
            (model, list(hashes)),
        )
        return {r[0]: bytes(r[1]) for r in rows}

    # -- summaries -----------------------------------------------------------------------

    def pending_summaries(self, after: int, limit: int) -> list[PendingSummary]:
        rows = self._all(
            """SELECT rowid, path, title, version FROM notes
               WHERE summary_state = 1 AND rowid > %s ORDER BY rowid LIMIT %s""",
            (after, limit),
        )
        return [PendingSummary(r[0], r[1], r[2], r[3]) for r in rows]

    # -- tests ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, list[tuple]]:
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
        # What BM25 weighs words with: row and word totals, and each word's row count.
        text = self._all("SELECT kind, rows, words FROM fts_stats ORDER BY kind")
        for table in ("note_terms", "chunk_terms"):
            text += self._all(
                f"SELECT '{table}', term, df FROM {table} WHERE df <> 0 ORDER BY term"
            )
        return {"notes": notes, "chunks": chunks, "links": links, "tags": tags, "text": text}


class Writes(Reads):
    """Queries that change the index, inside one `PostgresIndex.transaction()`. Word
    frequencies of added rows are counted here and written once, at commit (`flush`)."""

    def __init__(self, conn: Any, owner: Any) -> None:
        super().__init__(conn, owner, None)
        self._df: dict[str, Counter[str]] = {"notes": Counter(), "chunks": Counter()}
        self._totals: dict[str, list[int]] = {"notes": [0, 0], "chunks": [0, 0]}
        self._postings: dict[int, fulltext.TextRow] = {}  # note -> its words, written at flush

    def _run(self, sql: str, params: Sequence[object] = ()) -> Any:
        return self.conn.execute(sql, params)

    def _many(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        rows = list(rows)
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(sql, rows)

    def flush(self) -> None:
        """The word frequencies and totals counted in this transaction, written; then the
        notes' postings, their impacts at the vault's frozen mean note length."""
        for kind, table in (("notes", "note_terms"), ("chunks", "chunk_terms")):
            delta = {t: d for t, d in self._df[kind].items() if d}
            if delta:
                terms = sorted(delta)
                self._run(
                    f"""INSERT INTO {table}(term, df)
                        SELECT * FROM unnest(%s::text[], %s::int[])
                        ON CONFLICT (term) DO UPDATE SET df = {table}.df + excluded.df""",
                    (terms, [delta[t] for t in terms]),
                )
            rows, words = self._totals[kind]
            if rows or words:
                self._run(
                    "UPDATE fts_stats SET rows = rows + %s, words = words + %s WHERE kind = %s",
                    (rows, words, kind),
                )
            self._df[kind].clear()
            self._totals[kind] = [0, 0]
        self._write_postings()

    def _write_postings(self) -> None:
        if not self._postings:
            return
        avglen = self._impact_avglen()
        notes: list[int] = []
        terms: list[str] = []
        ws: list[float] = []
        lens: list[int] = []
        for note, row in self._postings.items():
            notes.extend([note] * len(row.tf))
            terms.extend(row.tf)
            ws.extend(row.tf.values())
            lens.extend([row.length] * len(row.tf))
        self._postings.clear()
        self._run(
            f"""INSERT INTO note_postings(term, note, w, flen, imp)
                SELECT t, n, w, l, {fulltext.impact_sql("w", "l", "%s")}
                FROM unnest(%s::text[], %s::bigint[], %s::real[], %s::int[]) AS u(t, n, w, l)""",
            (avglen, terms, notes, ws, lens),
        )

    def _impact_avglen(self) -> float:
        """The mean note length impacts are computed at: frozen in meta when the first
        notes are written (after their counts, so it is theirs), refreshed by maintain()."""
        frozen = self.get_meta(fulltext.AVGLEN_META)
        if frozen is not None:
            return float(frozen)
        rows, words = self._one("SELECT rows, words FROM fts_stats WHERE kind = 'notes'")  # type: ignore[misc]
        avglen = words / rows if rows and words else 1.0
        self.set_meta(fulltext.AVGLEN_META, repr(avglen))
        return avglen

    def refresh_impacts(self) -> bool:
        """The postings' impacts recomputed at the notes' mean length, if it moved by more
        than fulltext.AVGLEN_DRIFT since they were (a vault that grew or changed shape);
        True when they were."""
        avglen = self.stale_impacts()
        if avglen is None:
            return False
        self._run(
            f"UPDATE note_postings SET imp = {fulltext.impact_sql('w', 'flen', '%s')}", (avglen,)
        )
        self.set_meta(fulltext.AVGLEN_META, repr(avglen))
        return True

    def _count(self, kind: str, row: fulltext.TextRow, sign: int = 1) -> None:
        self._df[kind].update(dict.fromkeys(row.tf, sign))
        self._totals[kind][0] += sign
        self._totals[kind][1] += sign * row.length

    def _uncount_rows(self, kind: str, where: str, params: Sequence[object]) -> None:
        """Take rows about to go out of the word frequencies and totals."""
        table = "note_terms" if kind == "notes" else "chunk_terms"
        self._run(
            f"""INSERT INTO {table}(term, df)
                SELECT k, -count(*) FROM {kind} r, jsonb_object_keys(r.tf) k
                WHERE r.tf IS NOT NULL AND {where} GROUP BY k ORDER BY k
                ON CONFLICT (term) DO UPDATE SET df = {table}.df + excluded.df""",
            params,
        )
        self._run(
            f"""UPDATE fts_stats SET rows = rows - s.n, words = words - s.w
                FROM (SELECT count(*) AS n, coalesce(sum(flen), 0) AS w FROM {kind} r
                      WHERE r.tf IS NOT NULL AND {where}) s WHERE kind = %s""",
            (*params, kind),
        )

    def _uncount_note(self, rowid: int) -> None:
        """Take a note about to go out of the notes' word frequencies and totals (its
        postings not yet written, if it was written in this transaction, from the counts
        still to be written)."""
        pending = self._postings.pop(rowid, None)
        if pending is not None:
            self._df["notes"].subtract(dict.fromkeys(pending.tf, 1))
        self._run(
            """INSERT INTO note_terms(term, df)
               SELECT term, -1 FROM note_postings WHERE note = %s ORDER BY term
               ON CONFLICT (term) DO UPDATE SET df = note_terms.df + excluded.df""",
            (rowid,),
        )
        self._run(
            """UPDATE fts_stats SET rows = rows - 1, words = words - n.flen
               FROM notes n WHERE n.rowid = %s AND n.tsv IS NOT NULL AND kind = 'notes'""",
            (rowid,),
        )

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self._run("DELETE FROM meta WHERE key = %s", (key,))
        else:
            self._run(
                "INSERT INTO meta(key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- notes ---------------------------------------------------------------------------

    def touch_note(self, rowid: int, mtime_ns: int, size: int, mtime_iso: str) -> None:
        self._run(
            "UPDATE notes SET mtime_ns = %s, size = %s, sort_time = COALESCE(updated, %s) "
            "WHERE rowid = %s",
            (mtime_ns, size, mtime_iso, rowid),
        )

    def set_note_id(self, path: str, note_id: str) -> None:
        self._run("UPDATE notes SET id = %s WHERE path = %s", (note_id, path))

    def _drop_note_parts(self, rowid: int) -> None:
        self._uncount_rows("chunks", "r.note_rowid = %s", (rowid,))
        self._uncount_note(rowid)
        self._run("DELETE FROM note_postings WHERE note = %s", (rowid,))
        self._run("DELETE FROM chunks WHERE note_rowid = %s", (rowid,))  # vectors cascade
        self._run("DELETE FROM tags WHERE note_rowid = %s", (rowid,))
        self._run("DELETE FROM aliases WHERE note_rowid = %s", (rowid,))
        self._run("DELETE FROM links WHERE note_rowid = %s", (rowid,))

    def upsert_note(
        self,
        note: NoteRow,
        chunks: Sequence[ChunkRow],
        tags: Iterable[str],
        links: Sequence[LinkRow],
    ) -> int:

        row = self._one("SELECT rowid FROM notes WHERE path = %s", (note.path,))
        text = fulltext.text_row(*note.fts) if note.fts is not None else None
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
            text.tsv if text else None,
            text.length if text else 0,
        )
        if row is not None:
            rowid = row[0]
            self._drop_note_parts(rowid)
            self._run(
                """UPDATE notes SET id=%s, claimed_id=%s, title=%s, summary=%s, lead=%s,
                   created=%s, updated=%s, sort_time=%s, folder=%s, stem_key=%s, path_key=%s,
                   aliases=%s, mtime_ns=%s, size=%s, content_hash=%s, body_hash=%s, version=%s,
                   summary_state=%s, lang=%s, tsv=%s::tsvector, flen=%s,
                   llm_summary=NULL WHERE rowid=%s""",
                (*values, rowid),
            )
        else:
            rowid = self._one(
                """INSERT INTO notes(id, claimed_id, title, summary, lead, created, updated,
                   sort_time, folder, stem_key, path_key, aliases, mtime_ns, size, content_hash,
                   body_hash, version, summary_state, lang, tsv, flen, path)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,
                           %s::tsvector,%s,%s)
                   RETURNING rowid""",
                (*values, note.path),
            )[0]  # type: ignore[index]
        if text is not None:
            self._count("notes", text)
            if text.tf:
                self._postings[rowid] = text
        if note.summary_pending:
            cached = self._one(
                "SELECT summary FROM summary_cache WHERE model = %s AND body_hash = %s",
                (self.get_meta("summary_model") or "", note.body_hash),
            )
            if cached is not None:
                self._run(
                    "UPDATE notes SET llm_summary = %s, summary_state = 0 WHERE rowid = %s",
                    (cached[0], rowid),
                )
        texts = [fulltext.text_row(c.fts_title, c.fts_headings, c.fts_body) for c in chunks]
        for t in texts:
            self._count("chunks", t)
        if chunks:  # one statement per part, not one per row: a round trip each
            self._run(
                """INSERT INTO chunks(note_rowid, ordinal, heading_path, text, text_hash, tokens,
                   tsv, tf, flen)
                   SELECT %s, o, h, x, th, tk, v::tsvector, f::jsonb, l FROM unnest(
                       %s::int[], %s::text[], %s::text[], %s::text[], %s::int[], %s::text[],
                       %s::text[], %s::int[]) AS u(o, h, x, th, tk, v, f, l)""",
                (
                    rowid,
                    [c.ordinal for c in chunks],
                    [c.heading_path for c in chunks],
                    [c.text for c in chunks],
                    [c.text_hash for c in chunks],
                    [c.tokens for c in chunks],
                    [t.tsv for t in texts],
                    [json.dumps(t.tf, ensure_ascii=False) for t in texts],
                    [t.length for t in texts],
                ),
            )
        tags = sorted(set(tags))
        if tags:
            self._run(
                "INSERT INTO tags(note_rowid, tag) SELECT %s, unnest(%s::text[])", (rowid, tags)
            )
        alias_keys = sorted({a.lower() for a in note.aliases})
        if alias_keys:
            self._run(
                "INSERT INTO aliases(note_rowid, alias_key) SELECT %s, unnest(%s::text[])",
                (rowid, alias_keys),
            )
        if links:
            self._run(
                """INSERT INTO links(note_rowid, ordinal, target, target_key, heading, alias, embed)
                   SELECT %s, o - 1, t, k, h, a, e FROM unnest(
                       %s::text[], %s::text[], %s::text[], %s::text[], %s::smallint[])
                       WITH ORDINALITY AS u(t, k, h, a, e, o)""",
                (
                    rowid,
                    [ln.target for ln in links],
                    [ln.target.lower() for ln in links],
                    [ln.heading for ln in links],
                    [ln.alias for ln in links],
                    [int(ln.embed) for ln in links],
                ),
            )
        return rowid

    def chunk_keys(self, rowid: int) -> list[int]:
        rows = self._all(
            "SELECT rowid FROM chunks WHERE note_rowid = %s ORDER BY ordinal", (rowid,)
        )
        return [r[0] for r in rows]

    def delete_note(self, rowid: int) -> None:
        self._drop_note_parts(rowid)
        self._run(
            f"INSERT INTO gone_notes(id, content_hash, at) "
            f"SELECT id, content_hash, {NOW_SQL} FROM notes WHERE rowid = %s",
            (rowid,),
        )
        self._run("DELETE FROM notes WHERE rowid = %s", (rowid,))

    def redirect_moved(self, note_id: str, content_hash: str) -> None:
        if self._one("SELECT 1 FROM gone_notes LIMIT 1") is None:
            return
        self._run(f"DELETE FROM gone_notes WHERE at < {NOW_SQL} - 86400")
        row = self._one(
            "SELECT rowid, id FROM gone_notes WHERE content_hash = %s ORDER BY at DESC LIMIT 1",
            (content_hash,),
        )
        if row is None:
            return
        self._run("DELETE FROM gone_notes WHERE rowid = %s", (row[0],))
        if row[1] != note_id:
            self._run(
                "INSERT INTO id_redirects(old_id, new_id) VALUES (%s, %s) "
                "ON CONFLICT (old_id) DO UPDATE SET new_id = excluded.new_id",
                (row[1], note_id),
            )
            self._run("DELETE FROM id_redirects WHERE old_id = %s", (note_id,))

    def put_off_indexes(self) -> None:
        """Postgres keeps its indexes as rows come: nothing is put off."""

    def make_indexes(self) -> None:
        """Nothing was put off (put_off_indexes)."""

    def clear_notes(self) -> None:
        self._run(
            "TRUNCATE links, tags, aliases, chunks, notes, gone_notes, note_postings, note_terms, "
            "chunk_terms CASCADE"
        )
        self._run("UPDATE fts_stats SET rows = 0, words = 0")
        self.set_meta(fulltext.AVGLEN_META, None)
        self._postings.clear()
        for kind in self._df:
            self._df[kind].clear()
            self._totals[kind] = [0, 0]

    def resolve_links(self, keys: Iterable[str], note_rowids: Iterable[int] = ()) -> int:
        present = self._link_keys_where("target_key", sorted(set(keys)))
        present |= self._link_keys_where("note_rowid", list(note_rowids))
        resolve = self.key_resolver() if len(present) > BATCH_RESOLVE else self.resolve_key
        pairs = [(key, resolve(key)) for key in sorted(present)]
        if not pairs:
            return 0
        cur = self._run(
            """UPDATE links l SET target_rowid = p.target
               FROM unnest(%s::text[], %s::bigint[]) AS p(key, target)
               WHERE l.target_key = p.key AND l.target_rowid IS DISTINCT FROM p.target""",
            ([k for k, _ in pairs], [t for _, t in pairs]),
        )
        return cur.rowcount

    def resolve_every_link(self) -> int:
        keys = {r[0] for r in self._all("SELECT DISTINCT target_key FROM links")}
        return self.resolve_links(keys)

    def _link_keys_where(self, column: str, values: Sequence[object]) -> set[str]:
        if not values:
            return set()
        sql = f"SELECT DISTINCT target_key FROM links WHERE {column} = ANY(%s)"
        return {r[0] for r in self._all(sql, (list(values),))}

    # -- vectors -------------------------------------------------------------------------

    def reset_vectors(self, model: str, dim: int, tier: str = INSTANT) -> None:
        from vault_brain.index.postgres.schema import vector_table_sql

        t = _tier(tier)
        self._run(f"DROP TABLE IF EXISTS {t.table}")
        for statement in vector_table_sql(t.table, dim):
            self._run(statement)
        self._run(f"UPDATE chunks SET {t.state} = 0 WHERE {t.state} != 0")
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
        import numpy as np

        t = _tier(tier)
        if not items:
            return 0
        if cache:
            self.cache_vectors(model, ((h, v) for _, h, v in items))
        live = {
            (r[0], r[1]): r[2]
            for r in self._all(
                f"SELECT rowid, text_hash, note_rowid FROM chunks "
                f"WHERE {t.state} = 0 AND rowid = ANY(%s)",
                ([r for r, _, _ in items],),
            )
        }
        rows = [
            (r, live[(r, h)], np.frombuffer(v, dtype=np.float32))
            for r, h, v in items
            if (r, h) in live
        ]
        self._many(
            f"INSERT INTO {t.table}(chunk_rowid, note_rowid, embedding) VALUES (%s, %s, %s) "
            "ON CONFLICT (chunk_rowid) DO UPDATE SET embedding = excluded.embedding",
            rows,
        )
        if rows:
            self._run(
                f"UPDATE chunks SET {t.state} = 1 WHERE rowid = ANY(%s)", ([r for r, _, _ in rows],)
            )
        return len(rows)

    def cache_vectors(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        rows = dict(items)  # a later vector of a hash wins
        if rows:
            self._many(
                "INSERT INTO embed_cache(model, text_hash, vector) VALUES (%s, %s, %s) "
                "ON CONFLICT (model, text_hash) DO UPDATE SET vector = excluded.vector",
                [(model, h, rows[h]) for h in sorted(rows)],
            )

    # -- summaries -----------------------------------------------------------------------

    def set_llm_summary(self, rowid: int, version: str, summary: str, model: str = "") -> bool:
        cur = self._run(
            """UPDATE notes SET llm_summary = %s, summary_state = 0
               WHERE rowid = %s AND version = %s AND summary_state = 1""",
            (summary, rowid, version),
        )
        if cur.rowcount != 1:
            return False
        self._run(
            """INSERT INTO summary_cache(model, body_hash, summary)
               SELECT %s, body_hash, %s FROM notes WHERE rowid = %s
               ON CONFLICT (model, body_hash) DO UPDATE SET summary = excluded.summary""",
            (model, summary, rowid),
        )
        return True

    def queue_all_summaries(self) -> int:
        cur = self._run(
            "UPDATE notes SET summary_state = 1 WHERE summary = '' AND summary_state = 0"
        )
        return cur.rowcount
