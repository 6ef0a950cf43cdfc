"""What a pass learns of one file before any parsing: the `Prepared` record, and the read
that tells a file whose bytes did not change by their hash alone.

Light on purpose (no parser, chunker or analyser): a one-shot search's refresh that finds
a file touched but not changed (a sync tool or an editor saving the same bytes, a checkout,
an edit the last pass stored as "unsure" because it was younger than the mtime tick)
answers it without importing them: ~25 ms and ~30 MB less for such a search
(docs/benchmarks.md, "A touched note, and the search after an edit").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vault_brain.errors import VaultBrainError
from vault_brain.vault.reading import NoteReader
from vault_brain.vault.scan import FileStat

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.index.records import ChunkRow, LinkRow, NoteRow
    from vault_brain.vault.note import Note


@dataclass(frozen=True)
class Prepared:
    """One file, read and parsed, ready to store (or the reason it is not)."""

    stat: FileStat
    # "index" | "same" (bytes unchanged) | "gone" | "unreadable" (I/O) | "invalid" (not UTF-8)
    kind: str
    note: Note | None = None  # without body, links and headings: the rows hold them
    rows: tuple[NoteRow, list[ChunkRow], list[LinkRow]] | None = None  # the note's text is here
    reason: str = ""
    # The instant tier's vector of each chunk (float32 rows, in chunk order), when a parse
    # worker made them with the indexer's own model; None: the vector queue makes them.
    vectors: np.ndarray | None = None


def read_unless_same(
    root: Path,
    stat: FileStat,
    known_hash: str | None,
    follow_outside: list[str],
    reader: NoteReader | None = None,
) -> bytes | Prepared:
    """The file's bytes to parse, or its Prepared when there is nothing to parse: its bytes
    hash to `known_hash` (the index has them), or it is gone, unreadable or refused.
    `reader` (for `root` and the trusted folders) is made once by a caller that reads many
    files; without it one is made here."""
    try:
        if reader is None:
            reader = NoteReader(root, follow_outside)
        raw = reader.read(stat.path)
    except (FileNotFoundError, NotADirectoryError):
        return Prepared(stat, "gone")  # vanished between the stat and the read
    except VaultBrainError as exc:  # a symlink out of the vault, a name that is not UTF-8
        return Prepared(stat, "invalid", reason=exc.message)
    except OSError as exc:
        return Prepared(stat, "unreadable", reason=exc.__class__.__name__)
    if known_hash is not None and hashlib.blake2b(raw, digest_size=16).hexdigest() == known_hash:
        return Prepared(stat, "same")
    return raw
