"""Named queries over the sidecar. Callers never build SQL; they call these."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from vault_brain.index.db import Connection

VECTOR_TABLE = "chunk_vectors"


@dataclass(frozen=True)
class Filters:
    tags: tuple[str, ...] = ()
    folder: str | None = None
    since: str | None = None
    until: str | None = None

    def sql(self, alias: str = "n") -> tuple[str, list[object]]:
        """A WHERE fragment over notes (alias n) and its parameters."""
        parts: list[str] = []
        params: list[object] = []
        if self.folder:
            folder = self.folder.strip("/")
            parts.append(f"({alias}.folder = ? OR {alias}.folder LIKE ? ESCAPE '\\')")
            params += [folder, _like_prefix(folder) + "/%"]
        for tag in self.tags:
            tag = tag.lower().lstrip("#")
            parts.append(
                f"EXISTS (SELECT 1 FROM tags t WHERE t.note_rowid = {alias}.rowid "
                f"AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
            )
            params += [tag, _like_prefix(tag) + "/%"]
        if self.since:
            parts.append(f"{alias}.sort_time >= ?")
            params.append(self.since)
        if self.until:
            parts.append(f"{alias}.sort_time <= ?")
            params.append(self.until)
        return (" AND ".join(parts) or "1"), params

    @property
    def active(self) -> bool:
        return bool(self.tags or self.folder or self.since or self.until)


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# --- meta ---------------------------------------------------------------------------


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    else:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


# --- notes: writing -----------------------------------------------------------------


@dataclass(frozen=True)
class StoredStat:
    rowid: int
    mtime_ns: int
    size: int
    content_hash: str


def load_stats(conn: Connection) -> dict[str, StoredStat]:
    rows = conn.execute("SELECT path, rowid, mtime_ns, size, content_hash FROM notes")
    return {r[0]: StoredStat(r[1], r[2], r[3], r[4]) for r in rows}


def load_stats_under(conn: Connection, rel: str) -> dict[str, StoredStat]:
    """The note at `rel` and every note below it (a folder): one indexed range scan."""
    rows = conn.execute(
        "SELECT path, rowid, mtime_ns, size, content_hash FROM notes "
        "WHERE path = ? OR (path >= ? AND path < ?)",
        (rel, rel + "/", rel + "0"),  # '0' is the character after '/'
    )
    return {r[0]: StoredStat(r[1], r[2], r[3], r[4]) for r in rows}


def load_stat(conn: Connection, path: str) -> StoredStat | None:
    row = conn.execute(
        "SELECT rowid, mtime_ns, size, content_hash FROM notes WHERE path = ?", (path,)
    ).fetchone()
    return StoredStat(*row) if row else None


def touch_note(conn: Connection, rowid: int, mtime_ns: int, size: int) -> None:
    conn.execute("UPDATE notes SET mtime_ns = ?, size = ? WHERE rowid = ?", (mtime_ns, size, rowid))


def id_holder(conn: Connection, note_id: str) -> str | None:
    row = conn.execute("SELECT path FROM notes WHERE id = ?", (note_id,)).fetchone()
    return row[0] if row else None


def id_of(conn: Connection, path: str) -> str | None:
    row = conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
    return row[0] if row else None


def set_note_id(conn: Connection, path: str, note_id: str) -> None:
    conn.execute("UPDATE notes SET id = ? WHERE path = ?", (note_id, path))


def first_claimant(conn: Connection, note_id: str) -> str | None:
    """The path, first in path order, of a note whose file asks for this id."""
    row = conn.execute(
        "SELECT path FROM notes WHERE claimed_id = ? ORDER BY path LIMIT 1", (note_id,)
    ).fetchone()
    return row[0] if row else None


def _drop_note_parts(conn: Connection, rowid: int, has_vectors: bool) -> None:
    chunk_ids = [
        r[0] for r in conn.execute("SELECT rowid FROM chunks WHERE note_rowid = ?", (rowid,))
    ]
    if chunk_ids:
        marks = ",".join("?" * len(chunk_ids))
        conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", chunk_ids)
        if has_vectors:
            conn.execute(f"DELETE FROM {VECTOR_TABLE} WHERE rowid IN ({marks})", chunk_ids)
            bump_vector_epoch(conn)
        conn.execute("DELETE FROM chunks WHERE note_rowid = ?", (rowid,))
    conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
    conn.execute("DELETE FROM tags WHERE note_rowid = ?", (rowid,))
    conn.execute("DELETE FROM aliases WHERE note_rowid = ?", (rowid,))
    conn.execute("DELETE FROM links WHERE note_rowid = ?", (rowid,))


@dataclass(frozen=True)
class NoteRow:
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
    lang: str = ""  # the language its full text was analysed in (index/analysis.py)
    fts: tuple[str, str, str] | None = None  # analysed (title, headings, body) of the note


@dataclass(frozen=True)
class ChunkRow:
    ordinal: int
    heading_path: str
    text: str
    text_hash: str
    tokens: int
    fts_title: str
    fts_headings: str
    fts_body: str


@dataclass(frozen=True)
class LinkRow:
    target: str
    heading: str | None
    alias: str | None
    embed: bool


def upsert_note(
    conn: Connection,
    note: NoteRow,
    chunks: Sequence[ChunkRow],
    tags: Iterable[str],
    links: Sequence[LinkRow],
    *,
    has_vectors: bool,
) -> int:
    """Replace everything stored for note.path. Caller holds the transaction."""
    row = conn.execute("SELECT rowid FROM notes WHERE path = ?", (note.path,)).fetchone()
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
        _drop_note_parts(conn, rowid, has_vectors)
        conn.execute(
            """UPDATE notes SET id=?, claimed_id=?, title=?, summary=?, lead=?, created=?,
               updated=?, sort_time=?, folder=?, stem_key=?, path_key=?, aliases=?,
               mtime_ns=?, size=?, content_hash=?, body_hash=?, version=?, summary_state=?,
               lang=?, llm_summary=NULL WHERE rowid=?""",
            (*values, rowid),
        )
    else:
        cur = conn.execute(
            """INSERT INTO notes(id, claimed_id, title, summary, lead, created, updated,
               sort_time, folder, stem_key, path_key, aliases, mtime_ns, size, content_hash,
               body_hash, version, summary_state, lang, path)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (*values, note.path),
        )
        rowid = cur.lastrowid
    if note.summary_pending:
        # The same body was summarised by the same model before (a reindex, a moved note,
        # a frontmatter-only edit): reuse it instead of asking the LLM again.
        cached = conn.execute(
            "SELECT summary FROM summary_cache WHERE model = ? AND body_hash = ?",
            (get_meta(conn, "summary_model") or "", note.body_hash),
        ).fetchone()
        if cached is not None:
            conn.execute(
                "UPDATE notes SET llm_summary = ?, summary_state = 0 WHERE rowid = ?",
                (cached[0], rowid),
            )
    if note.fts is not None:
        conn.execute(
            "INSERT INTO notes_fts(rowid, title, headings, body) VALUES (?,?,?,?)",
            (rowid, *note.fts),
        )
    for c in chunks:
        cur = conn.execute(
            """INSERT INTO chunks(note_rowid, ordinal, heading_path, text, text_hash, tokens)
               VALUES (?,?,?,?,?,?)""",
            (rowid, c.ordinal, c.heading_path, c.text, c.text_hash, c.tokens),
        )
        conn.execute(
            "INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (?,?,?,?)",
            (cur.lastrowid, c.fts_title, c.fts_headings, c.fts_body),
        )
    conn.executemany(
        "INSERT OR IGNORE INTO tags(note_rowid, tag) VALUES (?, ?)", [(rowid, t) for t in tags]
    )
    conn.executemany(
        "INSERT OR IGNORE INTO aliases(note_rowid, alias_key) VALUES (?, ?)",
        [(rowid, a.lower()) for a in note.aliases],
    )
    conn.executemany(
        """INSERT INTO links(note_rowid, ordinal, target, target_key, heading, alias, embed)
           VALUES (?,?,?,?,?,?,?)""",
        [
            (rowid, i, ln.target, ln.target.lower(), ln.heading, ln.alias, int(ln.embed))
            for i, ln in enumerate(links)
        ],
    )
    return rowid


def delete_note(conn: Connection, rowid: int, *, has_vectors: bool) -> None:
    _drop_note_parts(conn, rowid, has_vectors)
    conn.execute("DELETE FROM notes WHERE rowid = ?", (rowid,))


# --- notes: reading -----------------------------------------------------------------

NOTE_COLUMNS = (
    "n.rowid, n.id, n.path, n.title, n.summary, n.llm_summary, n.lead, n.created, n.updated, "
    "n.sort_time, n.aliases, n.version, n.folder"
)


@dataclass(frozen=True)
class NoteInfo:
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


def _info(row: Sequence) -> NoteInfo:
    summary = row[4] or row[5] or row[6] or ""
    return NoteInfo(
        rowid=row[0],
        id=row[1],
        path=row[2],
        title=row[3],
        summary=summary,
        created=row[7],
        updated=row[8] or row[9],
        sort_time=row[9],
        aliases=tuple(json.loads(row[10] or "[]")),
        version=row[11],
        folder=row[12],
    )


def note_by_id(conn: Connection, note_id: str) -> NoteInfo | None:
    row = conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.id = ?", (note_id,)).fetchone()
    return _info(row) if row else None


def note_by_path(conn: Connection, path: str) -> NoteInfo | None:
    row = conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.path = ?", (path,)).fetchone()
    if row is None:  # case-insensitive file systems and hand-typed paths
        row = conn.execute(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.path = ? COLLATE NOCASE", (path,)
        ).fetchone()
    return _info(row) if row else None


def notes_by_rowids(conn: Connection, rowids: Sequence[int]) -> dict[int, NoteInfo]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.rowid IN ({marks})", rowids)
    return {r[0]: _info(r) for r in rows}


def list_notes(
    conn: Connection, filters: Filters, limit: int, after: tuple[str, int] | None
) -> list[NoteInfo]:
    """Newest first by (sort_time, rowid): a keyset cursor stays right while notes are added."""
    where, params = filters.sql()
    if after is not None:
        where += " AND (n.sort_time < ? OR (n.sort_time = ? AND n.rowid < ?))"
        params += [after[0], after[0], after[1]]
    rows = conn.execute(
        f"SELECT {NOTE_COLUMNS} FROM notes n WHERE {where} "
        f"ORDER BY n.sort_time DESC, n.rowid DESC LIMIT ?",
        (*params, limit),
    )
    return [_info(r) for r in rows]


def note_links(conn: Connection, rowid: int) -> list[LinkRow]:
    rows = conn.execute(
        "SELECT target, heading, alias, embed FROM links WHERE note_rowid = ? ORDER BY ordinal",
        (rowid,),
    )
    return [LinkRow(r[0], r[1], r[2], bool(r[3])) for r in rows]


def resolve_link(conn: Connection, target: str) -> NoteInfo | None:
    """Obsidian's resolution: a path (with folders) or a file name, else an alias."""
    key = target.strip().lower()
    if key.endswith(".md"):
        key = key[:-3]
    if "/" in key:
        row = conn.execute(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.path_key = ? OR n.path_key LIKE ? "
            "ESCAPE '\\' ORDER BY length(n.path) LIMIT 1",
            (key, "%/" + _like_prefix(key)),
        ).fetchone()
    else:
        row = conn.execute(
            f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.stem_key = ? "
            "ORDER BY length(n.path), n.path LIMIT 1",
            (key,),
        ).fetchone()
    if row is None:
        row = conn.execute(
            f"SELECT {NOTE_COLUMNS} FROM notes n JOIN aliases a ON a.note_rowid = n.rowid "
            "WHERE a.alias_key = ? ORDER BY n.path LIMIT 1",
            (key,),
        ).fetchone()
    return _info(row) if row else None


def backlink_rowids(conn: Connection, info: NoteInfo) -> list[int]:
    """Notes whose links may point at this note (the caller confirms by resolving)."""
    stem = info.path.rsplit("/", 1)[-1]
    stem = stem[:-3] if stem.lower().endswith(".md") else stem
    keys = {
        stem.lower(),
        info.path[:-3].lower() if info.path.lower().endswith(".md") else info.path.lower(),
    }
    keys |= {a.lower() for a in info.aliases}
    marks = ",".join("?" * len(keys))
    rows = conn.execute(
        f"SELECT DISTINCT note_rowid FROM links WHERE target_key IN ({marks}) "
        "OR target_key LIKE ? ESCAPE '\\'",
        (*keys, "%/" + _like_prefix(stem.lower())),
    )
    return [r[0] for r in rows if r[0] != info.rowid]


def note_with_body(conn: Connection, body_hash: str) -> NoteInfo | None:
    row = conn.execute(
        f"SELECT {NOTE_COLUMNS} FROM notes n WHERE n.body_hash = ? ORDER BY n.path LIMIT 1",
        (body_hash,),
    ).fetchone()
    return _info(row) if row else None


# --- counts ---------------------------------------------------------------------------


def has_notes(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM notes LIMIT 1").fetchone() is not None


def counts(conn: Connection) -> dict[str, int]:
    notes = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    pending = conn.execute("SELECT count(*) FROM chunks WHERE vec_state = 0").fetchone()[0]
    pending_summaries = conn.execute(
        "SELECT count(*) FROM notes WHERE summary_state = 1"
    ).fetchone()[0]
    return {
        "notes": notes,
        "chunks": chunks,
        "vectors": chunks - pending,
        "pending_vectors": pending,
        "pending_summaries": pending_summaries,
    }


def snapshot(conn: Connection) -> dict[str, list[tuple]]:
    """Everything a full reindex must reproduce, in a comparable form (tests use it)."""
    notes = conn.execute(
        "SELECT path, id, title, content_hash, version, summary, lead, created, updated, aliases "
        "FROM notes ORDER BY path"
    ).fetchall()
    chunks = conn.execute(
        "SELECT n.path, c.ordinal, c.heading_path, c.text FROM chunks c "
        "JOIN notes n ON n.rowid = c.note_rowid ORDER BY n.path, c.ordinal"
    ).fetchall()
    links = conn.execute(
        "SELECT n.path, l.ordinal, l.target, l.heading, l.alias, l.embed FROM links l "
        "JOIN notes n ON n.rowid = l.note_rowid ORDER BY n.path, l.ordinal"
    ).fetchall()
    tags = conn.execute(
        "SELECT n.path, t.tag FROM tags t JOIN notes n ON n.rowid = t.note_rowid "
        "ORDER BY n.path, t.tag"
    ).fetchall()
    return {"notes": notes, "chunks": chunks, "links": links, "tags": tags}


# --- full-text search ---------------------------------------------------------------


def note_languages(conn: Connection) -> dict[str, int]:
    """How many notes were analysed in each language (an index-only scan of notes_lang)."""
    rows = conn.execute("SELECT lang, count(*) FROM notes GROUP BY lang")
    return {r[0]: r[1] for r in rows if r[0]}


@dataclass(frozen=True)
class ChunkHit:
    chunk_rowid: int
    note_rowid: int
    score: float  # higher is better (FTS: -bm25; vector: cosine similarity)


# Column weights for bm25(): title, heading path, body.
FTS_WEIGHTS = (2.0, 1.0, 1.0)


def search_fts(conn: Connection, match: str, filters: Filters, limit: int) -> list[ChunkHit]:
    w = FTS_WEIGHTS
    if not filters.active:
        # Rank inside FTS5 first and join only the top rows: 2-3x faster on big vaults.
        rows = conn.execute(
            f"""SELECT f.rowid, c.note_rowid, f.s FROM (
                    SELECT rowid, bm25(chunks_fts, {w[0]}, {w[1]}, {w[2]}) AS s
                    FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?
                ) f JOIN chunks c ON c.rowid = f.rowid ORDER BY f.s""",
            (match, limit),
        )
        return [ChunkHit(r[0], r[1], -r[2]) for r in rows]
    where, params = filters.sql()
    rows = conn.execute(
        f"""SELECT f.rowid, c.note_rowid, bm25(chunks_fts, {w[0]}, {w[1]}, {w[2]}) AS s
            FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid
            JOIN notes n ON n.rowid = c.note_rowid
            WHERE chunks_fts MATCH ? AND {where}
            ORDER BY s LIMIT ?""",
        (match, *params, limit),
    )
    return [ChunkHit(r[0], r[1], -r[2]) for r in rows]


def search_fts_notes(
    conn: Connection, match: str, filters: Filters, limit: int
) -> list[tuple[int, float]]:
    """(note rowid, -bm25) of the notes whose whole text matches best, best first."""
    w = FTS_WEIGHTS
    where, params = filters.sql()
    if not filters.active:
        rows = conn.execute(
            f"""SELECT rowid, bm25(notes_fts, {w[0]}, {w[1]}, {w[2]}) AS s FROM notes_fts
                WHERE notes_fts MATCH ? ORDER BY s LIMIT ?""",
            (match, limit),
        )
    else:
        rows = conn.execute(
            f"""SELECT f.rowid, bm25(notes_fts, {w[0]}, {w[1]}, {w[2]}) AS s
                FROM notes_fts f JOIN notes n ON n.rowid = f.rowid
                WHERE notes_fts MATCH ? AND {where} ORDER BY s LIMIT ?""",
            (match, *params, limit),
        )
    return [(r[0], -r[1]) for r in rows]


def chunks_of_notes(
    conn: Connection, note_rowids: Sequence[int]
) -> list[tuple[int, int, str, str]]:
    """(note rowid, chunk rowid, chunk text, note language) of every chunk of these notes."""
    if not note_rowids:
        return []
    marks = ",".join("?" * len(note_rowids))
    rows = conn.execute(
        f"""SELECT c.note_rowid, c.rowid, c.text, n.lang FROM chunks c
            JOIN notes n ON n.rowid = c.note_rowid
            WHERE c.note_rowid IN ({marks}) ORDER BY c.rowid""",
        list(note_rowids),
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def chunk_texts(conn: Connection, chunk_rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
    if not chunk_rowids:
        return {}
    marks = ",".join("?" * len(chunk_rowids))
    rows = conn.execute(
        f"SELECT rowid, heading_path, text FROM chunks WHERE rowid IN ({marks})", chunk_rowids
    )
    return {r[0]: (r[1], r[2]) for r in rows}


# --- vectors ------------------------------------------------------------------------


def has_vector_table(conn: Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (VECTOR_TABLE,)).fetchone()
    return row is not None


def bump_vector_epoch(conn: Connection) -> None:
    """Every change to the vector table moves this counter: in-memory copies reload."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('vec_epoch', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


def vector_epoch(conn: Connection) -> str:
    return get_meta(conn, "vec_epoch") or "0"


def all_vectors(conn: Connection) -> tuple[list[int], list[int], bytes]:
    """(chunk rowids, note rowids, concatenated float32 vectors) of the whole vector table."""
    rows = conn.execute(
        f"SELECT v.rowid, c.note_rowid, v.embedding FROM {VECTOR_TABLE} v "
        "JOIN chunks c ON c.rowid = v.rowid"
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows], b"".join(r[2] for r in rows)


def vector_count(conn: Connection) -> int:
    return conn.execute(f"SELECT count(*) FROM {VECTOR_TABLE}_rowids").fetchone()[0]


def filtered_note_rowids(conn: Connection, filters: Filters) -> list[int]:
    where, params = filters.sql()
    return [r[0] for r in conn.execute(f"SELECT n.rowid FROM notes n WHERE {where}", params)]


def reset_vectors(conn: Connection, model: str, dim: int) -> None:
    """A new embedding model: drop old vectors (two models never mix), re-queue every chunk."""
    conn.execute(f"DROP TABLE IF EXISTS {VECTOR_TABLE}")
    conn.execute(
        f"CREATE VIRTUAL TABLE {VECTOR_TABLE} USING vec0("
        f"embedding float[{int(dim)}] distance_metric=cosine)"
    )
    conn.execute("UPDATE chunks SET vec_state = 0")
    bump_vector_epoch(conn)
    set_meta(conn, "embed_model", model)
    set_meta(conn, "embed_dim", str(dim))


@dataclass(frozen=True)
class PendingChunk:
    rowid: int
    text_hash: str
    embed_text: str


def pending_chunks(conn: Connection, limit: int) -> list[PendingChunk]:
    rows = conn.execute(
        """SELECT c.rowid, c.text_hash, c.heading_path, c.text FROM chunks c
           WHERE c.vec_state = 0 ORDER BY c.rowid LIMIT ?""",
        (limit,),
    )
    return [PendingChunk(r[0], r[1], f"{r[2]}\n\n{r[3]}") for r in rows]


def cached_vectors(conn: Connection, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
    if not hashes:
        return {}
    out: dict[str, bytes] = {}
    for start in range(0, len(hashes), 500):
        part = list(hashes[start : start + 500])
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT text_hash, vector FROM embed_cache WHERE model = ? AND text_hash IN ({marks})",
            (model, *part),
        )
        out.update({r[0]: r[1] for r in rows})
    return out


def store_vectors(conn: Connection, model: str, items: Sequence[tuple[int, str, bytes]]) -> None:
    """items: (chunk_rowid, text_hash, float32 bytes). Caller holds the transaction."""
    conn.executemany(
        "INSERT OR REPLACE INTO embed_cache(model, text_hash, vector) VALUES (?, ?, ?)",
        [(model, h, v) for _, h, v in items],
    )
    rowids = [r for r, _, _ in items]
    marks = ",".join("?" * len(rowids))
    # Only chunks that still exist, unchanged and pending (a note may have changed meanwhile).
    live = {
        (r[0], r[1])
        for r in conn.execute(
            f"SELECT rowid, text_hash FROM chunks WHERE vec_state = 0 AND rowid IN ({marks})",
            rowids,
        )
    }
    rows = [(r, v) for r, h, v in items if (r, h) in live]
    conn.executemany(f"INSERT OR REPLACE INTO {VECTOR_TABLE}(rowid, embedding) VALUES (?, ?)", rows)
    conn.executemany("UPDATE chunks SET vec_state = 1 WHERE rowid = ?", [(r,) for r, _ in rows])
    if rows:
        bump_vector_epoch(conn)


def search_vectors(
    conn: Connection, vector: np.ndarray, filters: Filters, k: int
) -> list[ChunkHit]:
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    if filters.active:
        # Exact scan over the filtered notes: a KNN over everything could miss them all.
        where, params = filters.sql()
        rows = conn.execute(
            f"""SELECT v.rowid, c.note_rowid, vec_distance_cosine(v.embedding, ?) AS d
                FROM {VECTOR_TABLE} v JOIN chunks c ON c.rowid = v.rowid
                JOIN notes n ON n.rowid = c.note_rowid
                WHERE {where} ORDER BY d LIMIT ?""",
            (blob, *params, k),
        )
    else:
        rows = conn.execute(
            f"""SELECT v.rowid, c.note_rowid, v.distance FROM {VECTOR_TABLE} v
                JOIN chunks c ON c.rowid = v.rowid
                WHERE v.embedding MATCH ? AND k = ? ORDER BY v.distance""",
            (blob, k),
        )
    # A zero vector (text the model has no tokens for) has no cosine: it is simply no match.
    return [ChunkHit(r[0], r[1], 1.0 - r[2]) for r in rows if r[2] is not None]


# --- summaries ----------------------------------------------------------------------


@dataclass(frozen=True)
class PendingSummary:
    rowid: int
    path: str
    title: str
    version: str


def pending_summaries(conn: Connection, after_rowid: int, limit: int) -> list[PendingSummary]:
    """Notes waiting for an LLM summary, by rowid after `after_rowid` (one pass never
    meets a note twice, even one that is re-queued meanwhile)."""
    rows = conn.execute(
        """SELECT rowid, path, title, version FROM notes
           WHERE summary_state = 1 AND rowid > ? ORDER BY rowid LIMIT ?""",
        (after_rowid, limit),
    )
    return [PendingSummary(r[0], r[1], r[2], r[3]) for r in rows]


def set_llm_summary(
    conn: Connection, rowid: int, version: str, summary: str, model: str = ""
) -> bool:
    """Store a summary of `version` of the note, take it off the queue and remember it by
    (model, body); False (nothing stored) when the note has changed or gone since."""
    cur = conn.execute(
        """UPDATE notes SET llm_summary = ?, summary_state = 0
           WHERE rowid = ? AND version = ? AND summary_state = 1""",
        (summary, rowid, version),
    )
    if cur.rowcount != 1:
        return False
    conn.execute(
        """INSERT OR REPLACE INTO summary_cache(model, body_hash, summary)
           SELECT ?, body_hash, ? FROM notes WHERE rowid = ?""",
        (model, summary, rowid),
    )
    return True


def queue_all_summaries(conn: Connection) -> int:
    """Queue every note without a frontmatter summary (a new summarizer); returns how many."""
    cur = conn.execute(
        "UPDATE notes SET summary_state = 1 WHERE summary = '' AND summary_state = 0"
    )
    return cur.rowcount
