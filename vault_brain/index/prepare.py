"""One file → the rows the index stores for it. Pure (no database), so it runs in this
process or in a parse worker (index/workers.py) alike."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vault_brain.config import Settings
from vault_brain.errors import VaultBrainError
from vault_brain.index.chunking import chunk_note
from vault_brain.index.hashes import iso_utc, text_hash
from vault_brain.index.records import ChunkRow, LinkRow, NoteRow
from vault_brain.text.analysis import analyze, frontmatter_language, note_language
from vault_brain.vault.note import Note, UnreadableNote, parse_note
from vault_brain.vault.reading import NoteReader
from vault_brain.vault.scan import FileStat

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.embed.base import Embedder


def _strip_title(heading_path: str, title: str) -> str:
    prefix = title + " > "
    if heading_path.startswith(prefix):
        return heading_path[len(prefix) :]
    return "" if heading_path == title else heading_path


def build_rows(
    note: Note,
    stat: FileStat,
    settings: Settings,
    summarize: bool,
    frontmatter_lang: str | None = None,
) -> tuple[NoteRow, list[ChunkRow], list[LinkRow]]:
    """Turn a parsed note into the rows the index stores for it. Its full text is analysed
    in its language: `frontmatter_lang` (its `lang:`), else detected, else configured."""
    lang = note_language(f"{note.title}\n\n{note.body}", frontmatter_lang, settings.text.languages)
    folder = posixpath.dirname(note.path)
    stem = posixpath.basename(note.path)
    stem = stem[:-3] if stem.lower().endswith(".md") else stem
    row = NoteRow(
        path=note.path,
        id=note.id,
        claimed_id=note.id,
        title=note.title,
        summary=note.summary,
        lead=note.lead,
        created=note.created,
        updated=note.updated,
        sort_time=note.updated or iso_utc(stat.mtime_ns),
        folder=folder,
        stem_key=stem.lower(),
        path_key=(note.path[:-3] if note.path.lower().endswith(".md") else note.path).lower(),
        aliases=tuple(note.aliases),
        mtime_ns=stat.mtime_ns,
        size=stat.size,
        content_hash=note.content_hash,
        body_hash=text_hash(note.body.strip()),
        version=note.version,
        summary_pending=summarize and not note.summary,
        lang=lang,
    )
    c = settings.chunk
    # What names and describes the note, weighted as its title in every full-text row:
    # frontmatter title (else heading or file name), aliases and summary.
    title_text = analyze(" ".join([note.title, *note.aliases, note.summary]), lang)
    tag_text = " ".join(note.tags)
    heading_paths: list[str] = []
    chunks = []
    for ch in chunk_note(
        note.title, note.body, c.max_tokens, c.overlap, c.min_tokens, note.headings
    ):
        headings = _strip_title(ch.heading_path, note.title)
        heading_paths.append(headings)
        chunks.append(
            ChunkRow(
                ordinal=ch.ordinal,
                heading_path=ch.heading_path,
                text=ch.text,
                text_hash=text_hash(f"{ch.heading_path}\n\n{ch.text}"),
                tokens=ch.tokens,
                fts_title=title_text,
                fts_headings=analyze(f"{headings} {tag_text}".strip(), lang),
                fts_body=analyze(ch.text, lang),
            )
        )
    # The whole note as one full-text row: evidence spread over chunks counts together.
    headings_text = " ".join(dict.fromkeys(h for h in heading_paths if h))
    row = row._replace(
        fts=(
            title_text,
            analyze(f"{headings_text} {tag_text}".strip(), lang),
            analyze(note.body, lang),
        ),
    )
    links = [LinkRow(ln.target, ln.heading, ln.alias, ln.embed) for ln in note.links]
    return row, chunks, links


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


def embed_text(chunk: ChunkRow) -> str:
    """What the embedder sees of a chunk (the vector queue reads the same from the index)."""
    return f"{chunk.heading_path}\n\n{chunk.text}"


def with_vectors(items: list[Prepared], embedder: Embedder) -> list[Prepared]:
    """The items, each note's chunks with their instant vectors: one model call for all of
    them, as the vector queue would make them (the same texts give the same vectors)."""
    import numpy as np

    texts = [embed_text(c) for p in items if p.rows is not None for c in p.rows[1]]
    if not texts:
        return items
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    out, at = [], 0
    for p in items:
        if p.rows is not None:
            n = len(p.rows[1])
            p = replace(p, vectors=vectors[at : at + n])
            at += n
        out.append(p)
    return out


def prepare(
    root: Path,
    stat: FileStat,
    known_hash: str | None,
    settings: Settings,
    summarize: bool,
    reader: NoteReader | None = None,
) -> Prepared:
    """Everything about one file that needs no database: pure, so it can run anywhere.
    `reader` (for `root` and the settings' trusted folders) is made once by a caller that
    prepares many files; without it one is made here."""
    try:
        if reader is None:
            reader = NoteReader(root, settings.vault.follow_outside)
        raw = reader.read(stat.path)
    except (FileNotFoundError, NotADirectoryError):
        return Prepared(stat, "gone")  # vanished between the stat and the read
    except VaultBrainError as exc:  # a symlink out of the vault, a name that is not UTF-8
        return Prepared(stat, "invalid", reason=exc.message)
    except OSError as exc:
        return Prepared(stat, "unreadable", reason=exc.__class__.__name__)
    if known_hash is not None and hashlib.blake2b(raw, digest_size=16).hexdigest() == known_hash:
        return Prepared(stat, "same")
    try:
        note = parse_note(stat.path, raw)
    except UnreadableNote as exc:
        return Prepared(stat, "invalid", reason=str(exc))
    # The frontmatter block is at the top: its `lang:` needs no second YAML parse.
    lang = frontmatter_language(raw[:8192].decode("utf-8", "ignore"))
    rows = build_rows(note, stat, settings, summarize, lang)
    # The rows hold the text now; the note travels (from a parse worker) without it.
    return Prepared(stat, "index", replace(note, body="", links=(), headings=()), rows)
