"""FTS5's row and word totals, kept true across deletes.

bm25() weighs a word by the table's row count (idf) and each row's length against the
mean (avgdl), both read from FTS5's "averages" record: varints in `<table>_data` row 1,
the row count, then the words of each column. A DELETE from a contentless_delete table
only adds a tombstone (fts5_storage.c, fts5StorageContentlessDelete): the record keeps
counting the rows and words that are gone, so an index that has seen edits ranked
differently from a fresh one of the same files (in SQLite up to 3.50 at least).

So the store reads a row's sizes (`<table>_docsize`, varints per column) before it deletes
the row, and at the end of the write transaction takes what it deleted off the record,
after a SAVEPOINT: FTS5 writes its cached totals out there and reads them anew before its
next write, so nothing it holds in memory overwrites the correction at COMMIT.
`recount` makes the record from `<table>_docsize` alone, for an index written before this.
"""

from __future__ import annotations

from collections.abc import Sequence

Connection = object  # a DB-API connection of the binding index/sqlite/db.py picked
AVERAGES_ROWID = 1  # FTS5_AVERAGES_ROWID
TABLES = ("chunks_fts", "notes_fts")
COLUMNS = 3  # title, headings, body (schema.py)
RECOUNTED = "fts_totals"  # meta key: the totals were recounted from the row sizes


def nothing_gone() -> dict[str, list[int]]:
    """[rows, words per column] deleted from each table: none yet."""
    return {table: [0] * (1 + COLUMNS) for table in TABLES}


def decode(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian 7-bit groups, the 9th byte whole) as integers."""
    out: list[int] = []
    i, n = 0, len(blob)
    while i < n:
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def encode(values: Sequence[int]) -> bytes:
    """Integers as SQLite's varints (what FTS5 writes: values below 2**56 here)."""
    out = bytearray()
    for value in values:
        if value < 0 or value >= 1 << 56:
            raise ValueError(f"no FTS5 total can be {value}")
        groups = [value & 0x7F]
        value >>= 7
        while value:
            groups.append(0x80 | (value & 0x7F))
            value >>= 7
        out += bytes(reversed(groups))
    return bytes(out)


def sizes(conn: Connection, table: str, rowids: Sequence[int]) -> list[int]:
    """[rows, words in each column] of these rows as FTS5 holds them (missing rows count
    nothing: FTS5 does not touch the totals for them either)."""
    gone = [0] * (1 + COLUMNS)
    if not rowids:
        return gone
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(  # type: ignore[attr-defined]
        f"SELECT sz FROM {table}_docsize WHERE id IN ({marks})", list(rowids)
    ).fetchall()
    for (blob,) in rows:
        gone[0] += 1
        for column, words in enumerate(decode(blob)[:COLUMNS]):
            gone[1 + column] += words
    return gone


def subtract(conn: Connection, gone: dict[str, list[int]]) -> None:
    """Take the deleted rows and words off each table's averages record. Inside the write
    transaction, after every FTS5 write of it."""
    if not any(any(v) for v in gone.values()):
        return
    conn.execute("SAVEPOINT fts_totals")  # type: ignore[attr-defined]
    try:
        for table, minus in gone.items():
            if not any(minus):
                continue
            have = stored(conn, table)
            left = [a - b for a, b in zip(have, minus, strict=True)]
            if min(left) < 0:  # a record out of step with the rows: make it from them
                left = counted(conn, table)
            _write(conn, table, left)
    finally:
        conn.execute("RELEASE fts_totals")  # type: ignore[attr-defined]


def recount(conn: Connection) -> None:
    """Every table's averages record made from its row sizes (an index whose deletes
    were never taken off). Inside a write transaction."""
    conn.execute("SAVEPOINT fts_totals")  # type: ignore[attr-defined]
    try:
        for table in TABLES:
            _write(conn, table, counted(conn, table))
    finally:
        conn.execute("RELEASE fts_totals")  # type: ignore[attr-defined]


def counted(conn: Connection, table: str) -> list[int]:
    """[rows, words in each column] of the rows FTS5 holds, from their sizes."""
    total = [0] * (1 + COLUMNS)
    for (blob,) in conn.execute(f"SELECT sz FROM {table}_docsize"):  # type: ignore[attr-defined]
        total[0] += 1
        for column, words in enumerate(decode(blob)[:COLUMNS]):
            total[1 + column] += words
    return total


def stored(conn: Connection, table: str) -> list[int]:
    """[rows, words in each column] as the table's averages record has them: what bm25()
    reads."""
    row = conn.execute(  # type: ignore[attr-defined]
        f"SELECT block FROM {table}_data WHERE id = ?", (AVERAGES_ROWID,)
    ).fetchone()
    values = decode(row[0]) if row and row[0] else []
    return (values + [0] * (1 + COLUMNS))[: 1 + COLUMNS]


def _write(conn: Connection, table: str, values: Sequence[int]) -> None:
    conn.execute(  # type: ignore[attr-defined]
        f"INSERT OR REPLACE INTO {table}_data(id, block) VALUES (?, ?)",
        (AVERAGES_ROWID, encode(values)),
    )
