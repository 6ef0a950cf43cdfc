"""The sidecar's schema in one readable block. Bump SCHEMA_VERSION on any change:
the index is disposable, so a new version simply rebuilds from the files."""

import re
from collections.abc import Iterable

SCHEMA_VERSION = 8

# The stat pass's covering index: every one-shot search compares the vault's (path, mtime,
# size) with the notes' in path order, read from this index alone (~6 against ~18 CPU-ms on
# cpp-docs' 9,746 notes: no row of the notes table is read). An index made before it gets
# it when opened (db.py), without a rebuild.
STAT_INDEX = "notes_stat"

# FTS5 tokenizer: unicode61 with diacritics removed, fed with text that text/analysis.py
# has already analysed per language (stemmed, stopwords dropped, CJK and Thai cut into
# bigrams). Marks (M*) are word characters, so Devanagari vowel signs and Thai tone marks
# stay inside their words.
FTS_TOKENIZE = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"

FTS_TABLES = {
    # chunk rows rank snippets; a row per whole note adds evidence spread over a note
    name: f"""CREATE VIRTUAL TABLE {name} USING fts5(
    title, headings, body,
    tokenize = "{FTS_TOKENIZE}",
    content = '', contentless_delete = 1
)"""
    for name in ("chunks_fts", "notes_fts")
}

SCHEMA = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE notes (
    rowid        INTEGER PRIMARY KEY,
    path         TEXT NOT NULL UNIQUE,      -- vault-relative POSIX path
    id           TEXT NOT NULL UNIQUE,
    claimed_id   TEXT NOT NULL,             -- the id the file asks for (frontmatter/derived)
    title        TEXT NOT NULL,
    summary      TEXT NOT NULL,             -- frontmatter summary ('' when none)
    llm_summary  TEXT,                      -- from a summarizer, when configured
    lead         TEXT NOT NULL,             -- extractive lead
    created      TEXT,
    updated      TEXT,                      -- frontmatter updated
    sort_time    TEXT NOT NULL,             -- updated, else file mtime (ISO 8601 UTC)
    folder       TEXT NOT NULL,             -- '' at the vault root
    stem_key     TEXT NOT NULL,             -- lower(file stem): wikilink resolution
    path_key     TEXT NOT NULL,             -- lower(path without .md)
    aliases      TEXT NOT NULL,             -- JSON list
    mtime_ns     INTEGER NOT NULL,
    size         INTEGER NOT NULL,
    content_hash TEXT NOT NULL,             -- hash of the file bytes
    body_hash    TEXT NOT NULL,             -- hash of the stripped body: duplicate saves
    version      TEXT NOT NULL,
    summary_state INTEGER NOT NULL DEFAULT 0, -- 0 none needed/done, 1 pending
    lang         TEXT NOT NULL DEFAULT ''   -- the language its text was analysed in
);
CREATE INDEX notes_sort ON notes(sort_time DESC, rowid DESC);
CREATE INDEX notes_folder ON notes(folder);
CREATE INDEX notes_stem ON notes(stem_key);
CREATE INDEX notes_path_key ON notes(path_key);
CREATE INDEX notes_body_hash ON notes(body_hash);
CREATE INDEX notes_claimed ON notes(claimed_id);
CREATE INDEX notes_lang ON notes(lang);
CREATE INDEX notes_stat ON notes(path, mtime_ns, size);
CREATE TABLE chunks (
    rowid        INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: vectors attach safely
    note_rowid   INTEGER NOT NULL REFERENCES notes(rowid) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    text         TEXT NOT NULL,
    text_hash    TEXT NOT NULL,             -- hash of what the embedder sees
    tokens       INTEGER NOT NULL,
    vec_state    INTEGER NOT NULL DEFAULT 0, -- instant tier: 0 pending, 1 embedded
    strong_state INTEGER NOT NULL DEFAULT 0  -- strong tier (when one is configured)
);
CREATE INDEX chunks_note ON chunks(note_rowid);
CREATE INDEX chunks_pending ON chunks(vec_state) WHERE vec_state = 0;
CREATE INDEX chunks_strong_pending ON chunks(strong_state) WHERE strong_state = 0;
{FTS_TABLES["chunks_fts"]};
{FTS_TABLES["notes_fts"]};
-- notes per term, for the idf weights of calibrated scores (search/calibration.py)
CREATE VIRTUAL TABLE notes_vocab USING fts5vocab(notes_fts, 'row');
CREATE TABLE tags (
    note_rowid INTEGER NOT NULL REFERENCES notes(rowid) ON DELETE CASCADE,
    tag        TEXT NOT NULL,
    PRIMARY KEY (note_rowid, tag)
) WITHOUT ROWID;
CREATE INDEX tags_tag ON tags(tag);
CREATE TABLE aliases (
    note_rowid INTEGER NOT NULL REFERENCES notes(rowid) ON DELETE CASCADE,
    alias_key  TEXT NOT NULL,
    PRIMARY KEY (note_rowid, alias_key)
) WITHOUT ROWID;
CREATE INDEX aliases_key ON aliases(alias_key);
CREATE TABLE links (
    note_rowid INTEGER NOT NULL REFERENCES notes(rowid) ON DELETE CASCADE,
    ordinal    INTEGER NOT NULL,
    target     TEXT NOT NULL,               -- as written, without .md
    target_key TEXT NOT NULL,               -- lower(target)
    heading    TEXT,
    alias      TEXT,
    embed      INTEGER NOT NULL,
    target_rowid INTEGER,                   -- the note it resolves to, kept current by sync
    PRIMARY KEY (note_rowid, ordinal)
) WITHOUT ROWID;
CREATE INDEX links_target ON links(target_key);
CREATE INDEX links_resolved ON links(target_rowid);
CREATE TABLE embed_cache (                -- a rowid table: 1 KB rows packed, not half-empty
    model     TEXT NOT NULL,                -- b-tree pages as WITHOUT ROWID left them (4x)
    text_hash TEXT NOT NULL,
    vector    BLOB NOT NULL,                -- float32 little-endian
    UNIQUE (model, text_hash)
);
CREATE INDEX notes_title ON notes(title COLLATE NOCASE);
CREATE TABLE gone_notes (                 -- notes removed lately: a move is a removal and an
    id           TEXT NOT NULL,             -- addition with the same bytes, and then the old
    content_hash TEXT NOT NULL,             -- (derived) id keeps working as a redirect
    at           REAL NOT NULL
);
CREATE INDEX gone_hash ON gone_notes(content_hash);
CREATE TABLE id_redirects (
    old_id TEXT PRIMARY KEY,
    new_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE summary_cache (              -- LLM summaries by content: a reindex asks no LLM
    model     TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    summary   TEXT NOT NULL,
    UNIQUE (model, body_hash)
)
"""


# Every index the schema makes, by name, with the statement that makes it.
INDEXES = {m[1]: m[0] for m in re.finditer(r"CREATE INDEX (\w+) ON [^;\n]*", SCHEMA)}
INDEX_NAMES = "SELECT name FROM sqlite_master WHERE type = 'index'"


def missing_indexes(have: Iterable[str]) -> list[str]:
    """The statements of the schema's indexes whose names are not in `have` (the names
    INDEX_NAMES reads): an older index's, or those a first index put off (PUT_OFF)."""
    present = set(have)
    return [sql for name, sql in INDEXES.items() if name not in present]


# The secondary indexes a first index of many notes builds at its end, from sorted keys,
# instead of row by row: their keys come in no order (titles, hashes, link targets), so 200
# notes a transaction rewrote most of their pages every time. None is read while a pass
# stores notes (paths, ids and chunks keep theirs); the pass's last transaction, which
# resolves the links, makes them first. A pass that dies before leaves them to the next open.
PUT_OFF = (
    "notes_sort",
    "notes_folder",
    "notes_stem",
    "notes_path_key",
    "notes_body_hash",
    "notes_claimed",
    "notes_lang",
    "notes_title",
    "tags_tag",
    "aliases_key",
    "links_target",
    "links_resolved",
)
