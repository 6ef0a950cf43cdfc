"""One file → the rows the index stores for it. Pure (no database), so it runs in this
process or in a parse worker (index/workers.py) alike."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from vault_brain.config import Settings
from vault_brain.index.chunking import Chunk, chunk_note
from vault_brain.index.hashes import iso_utc, text_hash
from vault_brain.index.prepared import Prepared, read_unless_same
from vault_brain.index.records import ChunkRow, LinkRow, NoteRow
from vault_brain.text.analysis import analyze, frontmatter_language, note_language
from vault_brain.vault.note import Note, UnreadableNote, parse_note
from vault_brain.vault.reading import NoteReader
from vault_brain.vault.scan import FileStat

if TYPE_CHECKING:
    from vault_brain.embed.base import Embedder


def _strip_title(heading_path: str, title: str) -> str:
    prefix = title + " > "
    if heading_path.startswith(prefix):
        return heading_path[len(prefix) :]
    return "" if heading_path == title else heading_path


_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # ASCII whitespace
# ASCII punctuation a word never crosses (every path of text/analysis.py splits at it),
# without the case-ignorable ' . : ^ ` (a final sigma is read across those).
_HARD = _SPACE | frozenset(b'!"#$%&()*+,-/;<=>?@[\\]_{|}~')


def _joined(*terms: str) -> str:
    """Analysed texts as the analysis of their texts joined by a space (the same terms)."""
    return " ".join(filter(None, terms))


def _splits(data: bytes, at: int) -> bool:
    """Whether the analysis of data[:at] and data[at:] joined is the analysis of data: the
    cut has an ASCII space on one side, or ASCII on both sides and a separator on one
    (_HARD; in ASCII text any punctuation). No word spans such a cut; NFKC composes
    nothing across it (a space never composes, and an ASCII character is never the
    second of a composite: only a cut before a combining mark could join `<` and U+0338);
    lower() reads no final sigma across it (a separator there is neither cased nor
    case-ignorable, and ASCII text holds no sigma)."""
    if at <= 0 or at >= len(data):
        return True
    before, after = data[at - 1], data[at]
    if before in _SPACE or after in _SPACE:
        return True
    if before >= 0x80 or after >= 0x80:
        return False
    if before in _HARD or after in _HARD:
        return True
    return not (chr(before).isalnum() and chr(after).isalnum()) and data.isascii()


def analysed_bodies(body: str, chunks: Sequence[Chunk], lang: str) -> tuple[list[str], str]:
    """The analysed text of each chunk and of the whole body, with each word of the body
    analysed once (not once for its chunk and again for the note's own row).

    Chunk i is body[start:end] (UTF-8 offsets), window chunks overlap: the body is cut
    where each window's overlap with the next begins, and each piece (and overlap) is
    analysed on its own. That gives the same terms wherever the cut falls beside a space
    or a separator (_splits; the chunker cuts at paragraph, line and word breaks). Where
    a cut falls inside a word, the chunk is analysed whole and the pieces on both sides of
    the cut are analysed together for the note's row. A body chunked from a cleaned copy
    (lone surrogates) is analysed as before: each chunk, then the whole body."""
    if not body.strip():  # one chunk of the title; the body holds no term
        return [analyze(ch.text, lang) for ch in chunks], ""
    if len(chunks) == 1 and chunks[0].start < 0 and chunks[0].text == body.strip():
        terms = analyze(chunks[0].text, lang)  # the whole body, stripped
        return [terms], terms
    try:
        data = body.encode("utf-8")
    except UnicodeEncodeError:
        data = b""
    if not data or any(ch.start < 0 for ch in chunks):
        return [analyze(ch.text, lang) for ch in chunks], analyze(body, lang)
    # Where each window's own piece ends: where the next window starts, or earlier (the
    # bytes between are blank: a blank window was dropped there).
    starts = [ch.start for ch in chunks[1:]] + [len(data)]
    ends = [min(ch.end, nxt) for ch, nxt in zip(chunks, starts, strict=True)]
    last = len(chunks) - 1
    bodies: list[str] = []
    note: list[str] = []
    run = chunks[0].start  # where the note's current piece began
    for i, ch in enumerate(chunks):
        end = ends[i]
        if i < last and not _splits(data, end):  # inside a word: the run goes on
            bodies.append(analyze(ch.text, lang))
            continue
        if run == ch.start:
            head = analyze(data[run:end].decode("utf-8"), lang)
            tail = analyze(data[end : ch.end].decode("utf-8"), lang) if end < ch.end else ""
            bodies.append(_joined(head, tail))
        else:  # the run began in an earlier window
            head = analyze(data[run:end].decode("utf-8"), lang)
            bodies.append(analyze(ch.text, lang))
        note.append(head)
        run = starts[i]
    return bodies, _joined(*note)


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
    tag_terms = analyze(" ".join(note.tags), lang)
    cut = chunk_note(note.title, note.body, c.max_tokens, c.overlap, c.min_tokens, note.headings)
    bodies, body_terms = analysed_bodies(note.body, cut, lang)
    heading_terms: dict[str, str] = {}  # a note's chunks share few heading paths
    chunks = []
    for ch, fts_body in zip(cut, bodies, strict=True):
        headings = _strip_title(ch.heading_path, note.title)
        terms = heading_terms.get(headings)
        if terms is None:
            terms = heading_terms[headings] = analyze(headings, lang)
        chunks.append(
            ChunkRow(
                ordinal=ch.ordinal,
                heading_path=ch.heading_path,
                text=ch.text,
                text_hash=text_hash(f"{ch.heading_path}\n\n{ch.text}"),
                tokens=ch.tokens,
                fts_title=title_text,
                fts_headings=_joined(terms, tag_terms),
                fts_body=fts_body,
            )
        )
    # The whole note as one full-text row: evidence spread over chunks counts together.
    # Its headings are the chunks' distinct heading paths, in order (dicts keep it).
    headings_terms = _joined(*(t for h, t in heading_terms.items() if h), tag_terms)
    row = row._replace(fts=(title_text, headings_terms, body_terms))
    links = [LinkRow(ln.target, ln.heading, ln.alias, ln.embed) for ln in note.links]
    return row, chunks, links


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
    raw = read_unless_same(root, stat, known_hash, settings.vault.follow_outside, reader)
    if isinstance(raw, Prepared):
        return raw
    return prepare_bytes(stat, raw, settings, summarize)


def prepare_bytes(stat: FileStat, raw: bytes, settings: Settings, summarize: bool) -> Prepared:
    """The rows of a file read by read_unless_same (index/prepared.py)."""
    try:
        note = parse_note(stat.path, raw)
    except UnreadableNote as exc:
        return Prepared(stat, "invalid", reason=str(exc))
    # The frontmatter block is at the top: its `lang:` needs no second YAML parse.
    lang = frontmatter_language(raw[:8192].decode("utf-8", "ignore"))
    rows = build_rows(note, stat, settings, summarize, lang)
    # The rows hold the text now; the note travels (from a parse worker) without it.
    return Prepared(stat, "index", replace(note, body="", links=(), headings=()), rows)
