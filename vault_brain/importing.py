"""Conversations from chat exports become notes (`vault-brain import`).

One note per conversation, or with `merge` the conversation goes under a dated heading
into the existing note whose topic it matches. Either way the note records, in its
frontmatter, a content hash of every message it holds (`imported_chats`), so the files
alone say what was imported: importing the same export again changes nothing, and a
conversation that grew gets only its new messages, wherever it went.

A run first reads every file and plans every note (validation), and writes only when all
of it is possible; each note is then written whole by vault/ (a new file linked into
place, or a version-checked replace), and all of them are indexed in one pass before the
run returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.contract import SUMMARY_MAX
from vault_brain.errors import InvalidInput, VaultBrainError
from vault_brain.importers import Conversation, message_hashes, read_export
from vault_brain.importers.markdown import merged_heading, note_title, render_messages
from vault_brain.importers.records import USER
from vault_brain.importers.wikilinks import Linker, LinkTarget
from vault_brain.text.secrets import find_secret
from vault_brain.vault import writer
from vault_brain.vault.frontmatter import LOAD_ERRORS, load_block, split_frontmatter
from vault_brain.vault.note import derived_id, file_version, new_id, parse_note
from vault_brain.vault.paths import resolve_folder_path, safe_filename
from vault_brain.vault.reading import read_note_bytes
from vault_brain.vault.render import render_new_note, render_update
from vault_brain.vault.scan import scan_vault

if TYPE_CHECKING:
    from vault_brain.index.records import NoteInfo
    from vault_brain.records import SearchResult
    from vault_brain.summarize.llm import Summarizer

__all__ = ["DEFAULT_FOLDER", "MERGE_THRESHOLD", "ImportReport", "Importer", "Outcome"]

# A conversation merges into the best-matching note when its score is at least this.
# Chosen on a labelled set (bench/import_merge.py; docs/benchmarks.md#merging-conversations).
MERGE_THRESHOLD = 0.5
DEFAULT_FOLDER = "Conversations"
IMPORTED_KEY = "imported_chats"  # {conversation key: [message hash, ...]}
SOURCE_KEY = "source"  # on a note made from one conversation: its key
QUERY_CHARS = 400


@dataclass(frozen=True)
class Outcome:
    """What a run did (or, dry, would do) with one conversation."""

    conversation: str  # its key, "claude:<uuid>"
    title: str
    action: str  # "create", "append" (to its own note), "merge", "unchanged", "empty"
    path: str | None  # the note written, or that would be
    messages: int  # messages this run adds
    total: int  # messages the conversation has
    score: float | None = None  # with merge: the best candidate's score
    candidate: str | None = None  # ... and its path


@dataclass(frozen=True)
class ImportReport:
    outcomes: list[Outcome]
    dry_run: bool
    merge: bool
    threshold: float
    notes_written: int
    errors: list[str] = field(default_factory=list)  # notes that could not be written
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Held:
    """An existing note that holds imported messages, or that this run appends to."""

    path: str
    raw: bytes
    id: str
    imported: dict[str, list[str]]
    source: str | None
    done: set[str]  # link targets (casefolded) the note links to already
    parts: list[str] = field(default_factory=list)  # Markdown to append, in order
    updated: str | None = None


@dataclass
class _New:
    conv: Conversation
    title: str
    body: str
    hashes: list[str]
    created: str
    updated: str
    summary: str = ""


class Importer:
    def __init__(
        self,
        settings: Settings,
        *,
        notes: Callable[[], Sequence[NoteInfo]],
        search: Callable[..., SearchResult],
        index: Callable[[list[str]], object],
        summarizer: Summarizer | None = None,
        note_lock: Callable[[str], AbstractContextManager[object]] = lambda path: nullcontext(),
    ) -> None:
        """`note_lock(path)`: the index's hold on one note for every process and host
        (index/port.py's Index.note_lock), around each edit of a note that exists."""
        self.settings = settings
        self.root = settings.vault_path
        self._notes = notes
        self._search = search
        self._index = index
        self._note_lock = note_lock
        self.summarizer = summarizer
        self.caveat = ""  # why merge matches are weaker than measured, when they are
        # (where, text) of what the user wrote: a credential is checked for where it is
        # pasted (the whole of every answer too costs a third of an import's time).
        self._pasted: list[tuple[str, str]] = []

    # -- the run -------------------------------------------------------------------------

    def run(
        self,
        fmt: str,
        files: Sequence[str | Path],
        *,
        folder: str | None = None,
        dry_run: bool = False,
        merge: bool = False,
    ) -> ImportReport:
        conversations = combine(read_export(fmt, files))
        self._pasted = []
        folder = DEFAULT_FOLDER if folder is None else folder.strip().strip("/")
        resolve_folder_path(self.root, folder)  # a folder outside the vault: refused now
        infos = list(self._notes())
        by_path = {i.path: i for i in infos}
        linker = Linker(link_targets(infos))
        held = self._held_notes(by_path)
        holders = {}
        for note in held.values():
            for conv_key in note.imported:
                if conv_key not in holders or note.source == conv_key:
                    holders[conv_key] = note.path
        outcomes: list[Outcome] = []
        news: list[tuple[int, _New]] = []  # (its place in outcomes, the note)
        now = _now()
        for conv, hashes in conversations:
            title = note_title(conv)
            total = len(conv.messages)
            if not total:
                outcomes.append(Outcome(conv.key, title, "empty", None, 0, 0))
                continue
            known = {h for note in held.values() for h in note.imported.get(conv.key, ())}
            fresh = [(m, h) for m, h in zip(conv.messages, hashes, strict=True) if h not in known]
            target, score, candidate = holders.get(conv.key), None, None
            if target is None and merge:
                candidate, score = self.best_match(conv, title)
                if candidate is not None and score >= MERGE_THRESHOLD:
                    target = candidate
                    held.setdefault(target, self._read_held(target, by_path))
                    holders[conv.key] = target
            if target is None:
                new = self._new_note(conv, title, hashes, linker, now)
                news.append((len(outcomes), new))
                path = f"{folder}/{safe_filename(title)}" if folder else safe_filename(title)
                outcomes.append(
                    Outcome(conv.key, title, "create", path, total, total, score, candidate)
                )
                continue
            note = held[target]
            if not fresh:
                outcomes.append(Outcome(conv.key, title, "unchanged", target, 0, total))
                continue
            own = note.source == conv.key
            self._append(note, conv, title, fresh, linker, now, own=own)
            action = "append" if own else "merge"
            outcomes.append(
                Outcome(conv.key, title, action, target, len(fresh), total, score, candidate)
            )

        # Everything is rendered and checked before the first write.
        warnings = [self.caveat] if self.caveat else []
        if self.settings.write.reject_secrets:
            warned: set[str] = set()  # one warning per note
            for where, text in self._pasted:
                if where not in warned and (kind := find_secret(text)):
                    warned.add(where)
                    warnings.append(
                        f"{where!r} holds what looks like a credential ({kind}); it is "
                        "imported as the export has it: remove it from the note if it should "
                        "not be there"
                    )
        if self.summarizer is not None and not dry_run:
            for _, new in news:
                new.summary = self._summary(new, warnings)
        ids = {i.id for i in infos}
        new_bytes = [(slot, new, self._render_new(new, ids)) for slot, new in news]
        edits = {p: self._render_edit(n) for p, n in held.items() if n.parts}
        self._check_sizes([(n.conv.origin, data) for _, n, data in new_bytes], edits)
        if dry_run:
            return ImportReport(outcomes, True, merge, MERGE_THRESHOLD, 0, [], warnings)

        written: list[str] = []
        errors: list[str] = []
        for slot, new, data in new_bytes:
            try:
                rel = writer.create_note_file(self.root, folder, new.title, data)
            except VaultBrainError as exc:
                errors.append(f"{new.conv.origin} ({new.title}): {exc.message}")
                continue
            outcomes[slot] = replace(outcomes[slot], path=rel)  # "Title 2.md" if taken
            written.append(rel)
        for path, data in edits.items():
            try:
                with self._note_lock(path):
                    writer.replace_note_file(self.root, path, file_version(held[path].raw), data)
            except VaultBrainError as exc:
                errors.append(f"{path}: {exc.message} (not changed; import again to retry)")
                continue
            written.append(path)
        try:
            self._index(written)  # one pass for them all: findable when the command returns
        except (VaultBrainError, OSError) as exc:
            warnings.append(f"the notes are written; the index takes them at its next sync ({exc})")
        log.event("import", format=fmt, conversations=len(outcomes), written=len(written))
        return ImportReport(outcomes, False, merge, MERGE_THRESHOLD, len(written), errors, warnings)

    def _check_sizes(self, news: list[tuple[str, bytes]], edits: dict[str, bytes]) -> None:
        cap = self.settings.vault.max_file_bytes
        for where, data in [*news, *edits.items()]:
            if len(data) > cap:
                raise InvalidInput(
                    f"{where}: the note would be {len(data):,} bytes, over vault.max_file_bytes "
                    f"({cap:,}); nothing was written"
                )

    # -- matching ------------------------------------------------------------------------

    def best_match(self, conv: Conversation, title: str) -> tuple[str | None, float]:
        """The note this conversation's topic matches best, and how well (0-1): a hybrid
        search (vectors, and full text, which reads titles too) with its title and first
        question. Its calibrated score is what MERGE_THRESHOLD was measured on."""
        found = self._search(match_query(conv, title), limit=3, min_score=0.0)
        if found.degraded:
            self.caveat = f"merge matches use full text only ({found.reason})"
        elif found.strong is not None:
            self.caveat = (
                f"the multilingual model covers {found.strong.done:,} of "
                f"{found.strong.total:,} chunks: merge matches use the English-only instant "
                "model, which matches less well (run `vault-brain index` first)"
            )
        if not found.hits:
            return None, 0.0
        return found.hits[0].path, round(found.hits[0].score, 3)

    # -- the notes that exist ------------------------------------------------------------

    def _held_notes(self, by_path: dict[str, NoteInfo]) -> dict[str, _Held]:
        """Every note whose frontmatter records imported messages, read from the files."""
        vault = self.settings.vault
        found = scan_vault(
            self.root, vault.ignore, vault.max_file_bytes, follow_outside=vault.follow_outside
        )
        held = {}
        marker = IMPORTED_KEY.encode()
        for f in found.files:
            try:
                raw = read_note_bytes(self.root, f.path, vault.follow_outside)
            except (OSError, VaultBrainError):
                continue
            if marker in raw and raw.startswith((b"---", b"\xef\xbb\xbf---")):
                note = self._held(f.path, raw, by_path)
                if note.imported:
                    held[f.path] = note
        return held

    def _read_held(self, path: str, by_path: dict[str, NoteInfo]) -> _Held:
        try:
            raw = read_note_bytes(self.root, path, self.settings.vault.follow_outside)
        except OSError as exc:
            raise InvalidInput(f"{path} cannot be read: {exc}") from exc
        return self._held(path, raw, by_path)

    def _held(self, path: str, raw: bytes, by_path: dict[str, NoteInfo]) -> _Held:
        meta = _frontmatter(raw)
        imported = meta.get(IMPORTED_KEY)
        if imported is None:
            imported = {}
        if not isinstance(imported, dict) or not all(
            isinstance(v, list) for v in imported.values()
        ):
            raise InvalidInput(
                f"{path}: its {IMPORTED_KEY} is not what vault-brain writes (conversation: "
                "[message hashes]); fix or remove it, then import again"
            )
        try:
            links = parse_note(path, raw).links
        except VaultBrainError:
            links = ()
        info = by_path.get(path)
        source = meta.get(SOURCE_KEY)
        done = {lk.target.rsplit("/", 1)[-1].casefold() for lk in links}
        done.add(path.rsplit("/", 1)[-1].removesuffix(".md").casefold())
        return _Held(
            path=path,
            raw=raw,
            id=info.id if info else derived_id(path),
            imported={str(k): [str(h) for h in v] for k, v in imported.items()},
            source=source if isinstance(source, str) else None,
            done=done,
        )

    # -- rendering -----------------------------------------------------------------------

    def _append(
        self,
        note: _Held,
        conv: Conversation,
        title: str,
        fresh: list[tuple[Any, str]],
        linker: Linker,
        now: str,
        *,
        own: bool,
    ) -> None:
        messages = [m for m, _ in fresh]
        self._pasted += [(note.path, m.text) for m in messages if m.role == USER]
        text = render_messages(messages, conv.source, lambda t: linker.link(t, note.done))
        if not own:
            day = (messages[0].created or conv.updated or now)[:10]
            text = merged_heading(conv, title, day) + text
        note.parts.append(text)
        note.imported.setdefault(conv.key, []).extend(h for _, h in fresh)
        latest = max(filter(None, (conv.updated, messages[-1].created)), default=now)
        stamp = latest if own else now
        note.updated = max(note.updated or "", stamp)

    def _new_note(
        self, conv: Conversation, title: str, hashes: list[str], linker: Linker, now: str
    ) -> _New:
        done: set[str] = set()
        self._pasted += [(title, m.text) for m in conv.messages if m.role == USER]
        body = render_messages(conv.messages, conv.source, lambda t: linker.link(t, done))
        times = [m.created for m in conv.messages if m.created]
        created = conv.created or (min(times) if times else now)
        updated = conv.updated or (max(times) if times else created)
        return _New(conv, title, body, hashes, created, max(updated, created))

    def _render_new(self, new: _New, ids: set[str]) -> bytes:
        while (note_id := new_id()) in ids:
            pass
        ids.add(note_id)
        return render_new_note(
            id=note_id,
            title=new.title,
            content=new.body,
            summary=new.summary,
            now=new.updated,
            created=new.created,
            extra={SOURCE_KEY: new.conv.key, IMPORTED_KEY: {new.conv.key: new.hashes}},
        )

    def _render_edit(self, note: _Held) -> bytes:
        try:
            return render_update(
                note.raw,
                append="\n".join(note.parts),
                id=note.id,
                now=note.updated or _now(),
                extra={IMPORTED_KEY: note.imported},
            )
        except InvalidInput as exc:
            raise InvalidInput(f"{note.path}: {exc.message}; nothing was written") from exc

    def _summary(self, new: _New, warnings: list[str]) -> str:
        assert self.summarizer is not None
        try:
            text = self.summarizer.summarize(new.title, new.body)
        except VaultBrainError as exc:
            warnings.append(f"no summary for {new.title!r}: {exc.message}")
            return ""
        return " ".join(text.split())[:SUMMARY_MAX]


def combine(conversations: list[Conversation]) -> list[tuple[Conversation, list[str]]]:
    """One entry per conversation key (an export given twice, a log split over files), its
    messages in order without repeats, with their hashes."""
    out: dict[str, tuple[Conversation, list[str]]] = {}
    for conv in conversations:
        hashes = message_hashes(conv.messages)
        if conv.key not in out:
            out[conv.key] = (conv, hashes)
            continue
        first, seen = out[conv.key]
        extra = [(m, h) for m, h in zip(conv.messages, hashes, strict=True) if h not in seen]
        merged = Conversation(
            source=first.source,
            id=first.id,
            title=first.title or conv.title,
            created=min(filter(None, (first.created, conv.created)), default=None),
            updated=max(filter(None, (first.updated, conv.updated)), default=None),
            messages=first.messages + tuple(m for m, _ in extra),
            origin=first.origin,
        )
        out[conv.key] = (merged, seen + [h for _, h in extra])
    return list(out.values())


def link_targets(infos: Sequence[NoteInfo]) -> list[LinkTarget]:
    """Each note's title and aliases, linked by its file name, or by its path when another
    note has the same file name (as Obsidian writes such links)."""
    stems: dict[str, int] = {}
    for info in infos:
        stem = _stem(info.path).casefold()
        stems[stem] = stems.get(stem, 0) + 1
    out = []
    for info in infos:
        stem = _stem(info.path)
        target = stem if stems[stem.casefold()] == 1 else info.path.removesuffix(".md")
        for name in (info.title, *info.aliases):
            out.append(LinkTarget(name, target))
    return out


def match_query(conv: Conversation, title: str) -> str:
    """What a conversation is about, as a search: its title and first question."""
    first = next((m.text for m in conv.messages if m.role == "user"), "")
    text = f"{title}\n{first}"
    return text[:QUERY_CHARS]


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _frontmatter(raw: bytes) -> dict[str, Any]:
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
    parts = split_frontmatter(text)
    if parts is None or not parts.closed:
        return {}
    try:
        data = load_block(parts.block)
    except LOAD_ERRORS:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k).strip().casefold(): v for k, v in data.items()}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
