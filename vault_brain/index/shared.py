"""What every backend's store does the same way, in Python: the note row it reads into a
`NoteInfo`, its embedding tiers, a listing's cursor, the order of a note's related notes,
Obsidian's link resolution over a whole vault at once, a folder's parents.

Each backend (index/sqlite/store.py, index/postgres/store.py) keeps only its SQL and calls
these, so the two answer the port alike by construction, not by two copies kept in step
(index/ranking.py does the same for the full-text ranking).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from vault_brain.errors import InvalidInput
from vault_brain.index.port import VectorSearch
from vault_brain.index.records import (
    INSTANT,
    STRONG,
    Filters,
    LeadsFirst,
    NoteInfo,
    PendingChunk,
)

if TYPE_CHECKING:
    import numpy as np

# The columns of notes (alias n) that note_info reads, in its order: every backend's
# schema has them under these names.
NOTE_COLUMNS = (
    "n.rowid, n.id, n.path, n.title, n.summary, n.llm_summary, n.lead, n.created, n.updated, "
    "n.sort_time, n.aliases, n.version, n.folder"
)


def note_info(row: Sequence) -> NoteInfo:
    """A row of NOTE_COLUMNS as the port's record: the summary is the frontmatter's, else
    the LLM's, else the lead; a note without a date was updated at its sort time."""
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


def like_prefix(text: str) -> str:
    """`text` with LIKE's wildcards and its escape character escaped (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# --- embedding tiers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tier:
    """Where one embedding tier keeps its vectors: two models are never in one table, and
    a vector is only ever compared with vectors of its own tier (and model)."""

    name: str  # "instant" | "strong" (index/records.py's TIERS)
    table: str  # the backend's vector table
    state: str  # the chunks column: 0 pending, 1 embedded
    meta: str  # prefix of its meta keys (<meta>_model, <meta>_dim, <meta>_epoch)


def make_tiers(instant_table: str, strong_table: str) -> dict[str, Tier]:
    """The two tiers, with the vector table each backend keeps them in."""
    return {
        INSTANT: Tier(INSTANT, instant_table, "vec_state", "embed"),
        STRONG: Tier(STRONG, strong_table, "strong_state", "strong"),
    }


def tier_named(tiers: dict[str, Tier], name: str) -> Tier:
    try:
        return tiers[name]
    except KeyError:
        raise ValueError(f"no embedding tier {name!r} (one of {', '.join(tiers)})") from None


# --- listings ----------------------------------------------------------------------------


def encode_cursor(sort_time: str, rowid: int) -> str:
    """The keyset cursor of a listing's last note (sort time, key), in base64 JSON: it stays
    right while notes come."""
    import base64  # here: a search never lists (~1 CPU-ms of a one-shot search's imports)

    raw = json.dumps([sort_time, rowid]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, int]:
    """(sort time, key) of a cursor encode_cursor made; anything else is InvalidInput."""
    import base64

    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sort_time, rowid = json.loads(raw)
        if not isinstance(sort_time, str) or not isinstance(rowid, int):
            raise TypeError
        if not -(2**63) <= rowid < 2**63:
            raise ValueError
        return sort_time, rowid
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this server gave out") from exc


def with_parents(folders: Iterable[str]) -> list[str]:
    """Every folder named, with its parents, sorted."""
    out: set[str] = set()
    for folder in folders:
        parts = folder.split("/")
        out |= {"/".join(parts[: i + 1]) for i in range(len(parts))}
    return sorted(out)


# --- related notes (index/port.py's Lookup.related) ------------------------------------


class Neighbours(Protocol):
    """The questions related_notes() is made of, each in the backend's own SQL."""

    def linked_notes(self, rowid: int, limit: int) -> list[int]:
        """The notes this one's links resolve to (not itself), in the order it first
        links them."""
        ...

    def linking_notes(self, rowid: int, limit: int) -> list[int]:
        """The notes that link to this one (not itself), by path."""
        ...

    def nearest_notes(self, rowid: int, limit: int, tiers: Sequence[str]) -> list[int]:
        """Other notes by their vectors against this note's mean, nearest first."""
        ...

    def notes_by_rowids(self, rowids: Sequence[int]) -> dict[int, NoteInfo]: ...


def related_notes(
    store: Neighbours, rowid: int, limit: int, tiers: Sequence[str]
) -> list[NoteInfo]:
    """index/port.py's contract: link neighbours (out in link order, then back by path),
    then the notes nearest by vector; never the note itself, never one note twice."""
    if limit <= 0:
        return []
    linked = store.linked_notes(rowid, limit)
    linking = store.linking_notes(rowid, limit)
    picked = dict.fromkeys([*linked, *linking])
    if len(picked) < limit:
        for note in store.nearest_notes(rowid, limit + len(picked), tiers):
            picked.setdefault(note)
    order = list(picked)[:limit]
    infos = store.notes_by_rowids(order)
    return [infos[r] for r in order if r in infos]


def notes_near_mean(
    store: VectorSearch,
    rowid: int,
    mean: np.ndarray,
    chunks: int,
    model: str,
    tier: str,
    limit: int,
) -> list[int]:
    """Other notes by their best chunk against `mean` (the mean of this note's `chunks`
    chunk vectors), nearest first: the port's allowed stand-in for note means. A zero
    mean has no direction: no notes."""
    import numpy as np

    norm = float(np.linalg.norm(mean))
    if norm == 0.0:
        return []
    # Its own chunks come first and a near note may fill several places: ask deep.
    k = min(chunks + 8 * limit, 1000)
    found = store.nearest_chunks(model, mean / norm, Filters(), k=k, tier=tier, noise=False)
    notes = dict.fromkeys(h.note_rowid for h in found.hits if h.note_rowid != rowid)
    return list(notes)[:limit]


# --- links -------------------------------------------------------------------------------


def key_resolver(
    notes: Iterable[tuple[int, str, str, str]], aliases: Iterable[tuple[str, str, int]]
) -> Callable[[str], int | None]:
    """Obsidian's resolution of a link key (lowercased, without .md) over every note at
    once, as each store's resolve_key answers it one key at a time (tested alike): a path
    (with folders) or a file name, the shortest path first, else an alias (first by path).
    `notes`: (key, path, stem key, path key); `aliases`: (alias key, path, note key)."""
    by_stem: dict[str, tuple[int, str, int]] = {}
    by_tail: dict[str, tuple[int, str, int]] = {}  # "folder/note" suffixes and full paths
    for rowid, path, stem_key, path_key in notes:
        rank = (len(path), path, rowid)
        if stem_key not in by_stem or rank < by_stem[stem_key]:
            by_stem[stem_key] = rank
        parts = path_key.split("/")
        for start in range(len(parts) - 1):
            tail = "/".join(parts[start:])
            if tail not in by_tail or rank < by_tail[tail]:
                by_tail[tail] = rank
    by_alias: dict[str, tuple[str, int]] = {}
    for alias_key, path, rowid in aliases:
        if alias_key not in by_alias or (path, rowid) < by_alias[alias_key]:
            by_alias[alias_key] = (path, rowid)

    def resolve(key: str) -> int | None:
        found = (by_tail if "/" in key else by_stem).get(key)
        if found is not None:
            return found[2]
        alias = by_alias.get(key)
        return alias[1] if alias else None

    return resolve


def pending_in_order(
    pending: Callable[[str, tuple, int, bool], list[PendingChunk]],
    state: str,
    tier: str,
    limit: int,
    leads: LeadsFirst | None,
    mark: str,
) -> list[PendingChunk]:
    """The tier's pending chunks as the port orders them: plain key order, or with `leads`
    the notes' lead chunks (ordinal 0) past `leads.past` first, then the others.
    `pending(where, params, limit, lead)` runs the backend's query; `mark` is its
    placeholder ("?" or "%s")."""
    where = f"c.{state} = 0"
    if leads is None:
        return pending(where, (), limit, False)
    first, params = f"{where} AND c.ordinal = 0", ()
    if leads.past is not None:
        first += f" AND c.rowid {'<' if tier == STRONG else '>'} {mark}"
        params = (leads.past,)
    found = pending(first, params, limit, True)
    if len(found) < limit:
        found += pending(f"{where} AND c.ordinal <> 0", (), limit - len(found), False)
    return found
