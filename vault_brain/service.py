"""Brain: the one facade that the CLI and the MCP server call.

Reads come from the index through the search pipeline and named queries; writes go to the
files first (vault/), then the Indexer indexes that one file at once, so a saved note is
findable by full text when the call returns. Everything else lives in the pieces:
index/ (the sidecar, behind index/port.py), indexer.py (the only write path into it),
search/ (the pipeline).

The note and write modules (vault/note, history, writer, render: YAML, ctypes, ~30 CPU-ms)
are imported by the methods that read or write a note's file, so a process that only
searches (a one-shot CLI `search`) never loads them.
"""

from __future__ import annotations

import functools
import os
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from vault_brain import log
from vault_brain.checks import check_text, clean_tags, parse_when
from vault_brain.config import Settings
from vault_brain.contract import CONFLICT_CONTENT_MAX, MODES, SUMMARY_MAX, TITLE_MAX
from vault_brain.embed import Embedder, make_embedder, make_strong_embedder
from vault_brain.embed.cache import ModelCache
from vault_brain.embed.early import Early
from vault_brain.errors import (
    Conflict,
    Forbidden,
    IndexDamaged,
    InvalidInput,
    NotFound,
    Unavailable,
)
from vault_brain.index.factory import open_index, open_reader
from vault_brain.index.hashes import text_hash
from vault_brain.index.port import Index
from vault_brain.index.records import INSTANT, STRONG, Filters, NoteInfo
from vault_brain.index.sync import Progress, SyncReport
from vault_brain.indexer import Indexer
from vault_brain.records import (
    Indexing,
    NotePage,
    NoteRef,
    NoteSummary,
    NoteView,
    RelatedNote,
    SaveResult,
    SearchResult,
    Status,
    Trashed,
)
from vault_brain.search.fulltext import FullTextArm
from vault_brain.search.pipeline import SearchPipeline
from vault_brain.search.semantic import VectorArm, query_loader
from vault_brain.seen import VERSION, SeenVersions
from vault_brain.summarize import make_summarizer
from vault_brain.vault.paths import normalize_ref, resolve_folder_path
from vault_brain.vault.reading import read_note_bytes

if TYPE_CHECKING:
    from vault_brain.importing import ImportReport
    from vault_brain.summarize.llm import Summarizer
    from vault_brain.vault.history import Version

__all__ = ["Brain", "SyncReport"]

# A name that several notes share is refused, and this many of them are named.
CANDIDATES_SHOWN = 5


T = TypeVar("T")

# memory_get's `related`: this many notes, each with a summary of one line this long at most.
RELATED_MAX = 5
ONE_LINE_MAX = 160


def one_write_at_a_time(method: Callable[..., T]) -> Callable[..., T]:
    """A Brain's writes run one at a time. They meet at the index's write lock anyway; a
    save in each of 8 threads meanwhile trades the GIL with the others thousands of times a
    second (1,600 saves: 179k context switches against 16k in one thread), and the
    server's event loop waits behind them all. One at a time, a save also sees the save
    before it (a duplicate is one note, not two)."""

    @functools.wraps(method)
    def run(self: Brain, *args: Any, **kwargs: Any) -> T:
        with self._writes:
            return method(self, *args, **kwargs)

    return run


class Brain:
    """The vault, its index and its models, behind one thread-safe object."""

    def __init__(
        self,
        settings: Settings,
        *,
        index: Index | None = None,
        embedder: Embedder | None | str = "auto",
        summarizer: Summarizer | None | str = "auto",
        one_shot: bool = False,
    ) -> None:
        """`index`: the index to use (any index/port.py Index; the Brain closes it), else
        the one `index.url` names (index/factory.py). `one_shot`: this process answers one
        command and exits (the CLI), so it reads only what that command needs (no
        in-memory vector matrix)."""
        self.settings = settings
        self.root = settings.vault_path
        self.one_shot = one_shot
        self.embedder: Embedder | None = (
            make_embedder(settings.embed) if embedder == "auto" else embedder  # type: ignore[assignment]
        )
        # The strong tier: only beside the configured local model, never beside a model a
        # caller passed in (tests, benches), which is then the only one.
        self.strong: Embedder | None = (
            make_strong_embedder(settings.embed, ModelCache.under(settings.embed.cache_dir))
            if embedder == "auto"
            else None
        )
        self.summarizer: Summarizer | None = (
            make_summarizer(settings.summary) if summarizer == "auto" else summarizer  # type: ignore[assignment]
        )
        self.index: Index = index if index is not None else open_index(settings, one_shot=one_shot)
        self.indexer = Indexer(
            settings, self.index, self.embedder, self.summarizer, strong=self.strong
        )
        self._vector_arm = VectorArm(
            self.embedder,
            self.indexer.embed_backoff,
            strong=self.strong,
            strong_backoff=self.indexer.strong_backoff,
            cache=ModelCache.under(settings.embed.cache_dir),
        )
        self.pipeline = SearchPipeline(
            self.index, settings.search, [FullTextArm(settings.text), self._vector_arm]
        )
        self._writes = threading.RLock()  # see one_write_at_a_time
        self._seen = SeenVersions()  # what a CONFLICT tells apart
        self._closed = False

    # -- keeping the index in step (the Indexer does the work) ---------------------------

    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        """Bring the index in step with the vault: stat pass, hash, re-index what changed.
        Raises Unavailable while another process indexes the vault. `stop`, once set, ends
        the pass after the batch being stored (the report says `stopped`); the next pass
        continues from there."""
        return self.indexer.sync(full=full, progress=progress, stop=stop)

    @contextmanager
    def index_run(self) -> Iterator[None]:
        """Hold the vault's indexer role for an explicit run (`vault-brain index`: its pass
        and its vectors): nothing else indexes meanwhile, a watcher waits for it, and
        `status` says an index run is in progress. Raises Unavailable, naming the process,
        when another holds the role."""
        with self.indexer.exclusive():
            yield

    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        return self.indexer.sync_paths(paths)

    def embed_pending(self, *, limit: int | None = None, strong: bool = True) -> int:
        """Vectors of pending chunks, instant tier then (unless `strong` is False) strong."""
        return self.indexer.embed_pending(limit=limit, strong_limit=limit if strong else 0)

    def calibrate(self, *, force: bool = False) -> list[str]:
        """Measure what "no relation" scores in this vault for each tier whose vectors
        cover it (search/fit.py), when due; returns the tiers fitted."""
        return self.indexer.calibrate(force=force)

    def embed_strong(self, *, limit: int | None = None) -> int:
        """Vectors of the strong tier only (the slow, multilingual one)."""
        return self.indexer.embed_pending(limit=0, strong_limit=limit)

    def watched(self) -> bool:
        """Some process (this one or another) keeps the index in step right now."""
        return self.indexer.watched()

    def summarize_pending(self, *, limit: int | None = None) -> int:
        return self.indexer.summarize_pending(limit=limit)

    def start_watching(self) -> Callable[[], None]:
        """Keep the index in step from background threads (the indexer role when this
        process can take the vault's lock, else a reader that takes over later). Returns
        the function that stops it."""
        self.indexer.start()
        return self.indexer.stop

    def keep_query_models(self) -> None:
        """Make what a CLI search loads now, where it is missing (e5's light encoder: its
        weights kept and checked in the user's cache), so the first search after an `index`
        starts at once instead of building them (~0.6 s) and checking them (~0.2 s)."""
        load = getattr(self.strong, "load_light", None)
        if load is None:
            return
        try:
            load()
        except Exception as exc:  # noqa: BLE001 - a search says what is wrong, later
            log.warn("query_models_not_kept", error=str(exc)[:200])

    def begin_query(
        self,
        query: str,
        *,
        mode: str | None = None,
        limit: int | None = None,
        tags: Sequence[str] = (),
        folder: str | None = None,
        since: str | None = None,
        until: str | None = None,
        early: Early | None = None,
    ) -> None:
        """A one-shot search's first step, with the arguments `search(light_query=True)`
        will get: where a second core can run it and the vector arm's in-process models
        are not loaded here, the arm's whole answer is made in a forked process (search/
        semantic.py begin_early), beside this one's stat pass and full-text arm; the
        search takes it when the index did not change meanwhile. `early`: that process,
        forked before this Brain was made (oneshot.py begin); it is this Brain's from now
        on (told the request, or ended)."""
        request = None
        if self.one_shot and (mode or self.settings.search.mode) != "fts" and query.strip():
            try:
                filters = self._filters(tags, folder, since, until)
            except (InvalidInput, NotFound):
                filters = None  # the search says what is wrong
            if filters is not None:
                limit = limit or self.settings.search.limit
                request = self.pipeline.request(query, limit=limit, filters=filters, light=True)
        if request is not None:
            with self.index.read() as reads:
                if not self._vector_arm.early_wanted(reads):
                    request = None
        if request is not None:
            self._vector_arm.begin_early(self.index, request, early)
        elif early is not None:
            early.discard()

    def refresh_if_unwatched(self, *, vectors: bool = True) -> bool:
        """When no watcher or server indexes this vault, bring the index in step now (and
        its vectors, unless the caller only needs full text)."""
        return self.indexer.catch_up_if_unwatched(vectors=vectors)

    def wait_until_indexed(self, timeout: float) -> bool:
        return self.indexer.wait_until_indexed(timeout)

    # -- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        mode: str | None = None,
        tags: Sequence[str] = (),
        folder: str | None = None,
        since: str | None = None,
        until: str | None = None,
        explain: bool = False,
        min_score: float | None = None,
        light_query: bool = False,
    ) -> SearchResult:
        """`light_query`: the query's vectors by the light encoders (embed/base.py), as every
        CLI search asks, in this process, a resident or a watcher: the same bytes from each."""
        s = self.settings.search
        mode = mode or s.mode
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
        if not query or not query.strip():
            raise InvalidInput("query is empty")
        limit = limit or s.limit
        self.indexer.refresh_for_read()
        filters = self._filters(tags, folder, since, until)
        try:
            found = self.pipeline.run(
                query, mode=mode, limit=limit, filters=filters, explain=explain, light=light_query
            )
        except IndexDamaged:
            # Rebuilt now where this process may index (then asked again), else by the
            # indexer's next pass: the caller may retry.
            if not self.indexer.damaged():
                raise
            found = self.pipeline.run(
                query, mode=mode, limit=limit, filters=filters, explain=explain, light=light_query
            )
        hits, below = found.hits, 0
        cut = s.min_score if min_score is None else min_score
        if cut > 0:
            hits = [h for h in found.hits if h.score >= cut]
            below = len(found.hits) - len(hits)
        strong = None
        if self.strong is not None and found.vector_tier != "strong" and mode != "fts":
            done, total = self.indexer.strong_coverage()
            strong = Indexing(done, total) if total else None
        return SearchResult(
            hits,
            mode,
            found.degraded,
            found.reason,
            indexing=self.indexer.indexing(),
            vector_tier=found.vector_tier,
            strong=strong,
            below_cutoff=below,
        )

    def count_tokens(self, text: str) -> int:
        """cl100k tokens of `text` (the chunker's tokenizer, loaded offline): what a reply on
        a budget is measured in."""
        from vault_brain.index.chunking import count_tokens

        return count_tokens(text)

    # -- reading -----------------------------------------------------------------------

    def _find(self, ref: str) -> NoteInfo:
        """The note a model means: a vault path (with or without .md) first, whatever ids
        notes claim; then an id (or the id a moved note had); then a title, then an alias
        (any case); then a file name anywhere in the vault. A title, alias or file name that
        several notes share is refused (InvalidInput with their `candidates`): picking one
        would let a model read, update or delete the wrong note."""
        ref = (ref or "").strip()
        if not ref:
            raise InvalidInput("id is empty")
        path = normalize_ref(ref)
        stem = path[:-3] if path.lower().endswith(".md") else path
        with self.index.read() as r:
            # Composed as clients type it, or decomposed as macOS names files.
            spellings = dict.fromkeys([path, unicodedata.normalize("NFD", path)])
            info = None
            for spelling in spellings:
                info = info or r.note_by_path(spelling)
                if info is None and not spelling.lower().endswith(".md"):
                    info = r.note_by_path(spelling + ".md")
            info = info or r.note_by_id(ref)
            moved, hops = ref, 0
            while info is None and hops < 5 and (moved := r.redirect(moved) or "") != "":
                info, hops = r.note_by_id(moved), hops + 1
            if info is not None:
                return info
            for name, found in (
                ("title", lambda: r.notes_by_title(ref, CANDIDATES_SHOWN + 1)),
                ("alias", lambda: r.notes_by_alias(ref, CANDIDATES_SHOWN + 1)),
                ("file name", lambda: r.notes_by_stem(stem, CANDIDATES_SHOWN + 1)),
            ):
                if name == "file name" and "/" in stem:
                    break
                infos_named = found()
                if len(infos_named) == 1:
                    return infos_named[0]
                if infos_named:
                    raise _ambiguous(ref, name, infos_named)
        if self._index_on_demand(path):
            return self._find(ref)
        state = self.indexer.indexing()
        if state is not None:
            raise Unavailable(
                f"{ref!r} is not indexed yet: the first pass over the vault is running "
                f"({state.done} of {state.total or '?'} files); retry in a few seconds",
                indexing={"done": state.done, "total": state.total},
            )
        with self.index.read() as r:
            names = r.names()
            import difflib

            close = difflib.get_close_matches(ref.lower(), [n.lower() for n, _ in names], 3, 0.6)
            rowids = list(dict.fromkeys(rowid for n, rowid in names if n.lower() in close))
            infos = r.notes_by_rowids(rowids[:3])
        suggestions = [
            {"id": i.id, "title": i.title, "path": i.path}
            for i in (infos[rowid] for rowid in rowids[:3] if rowid in infos)
        ]
        hint = "; ".join(f"{s['title']!r} (id {s['id']})" for s in suggestions)
        raise NotFound(
            f"no note with id, path, title or alias {ref!r}"
            + (f"; did you mean {hint}" if hint else "")
            + "; memory_search finds notes by their content",
            suggestions=suggestions,
        )

    def _index_on_demand(self, path: str) -> bool:
        """A note file the index does not hold yet (a first pass is still on its way to it,
        or a watcher has not seen it): index it now. True when that found it."""
        rel = path if path.lower().endswith(".md") else path + ".md"
        if rel.startswith((".", "/")) or "/." in rel or ".." in rel.split("/"):
            return False  # hidden, ignored or outside: never a note the index would hold
        full = self.root / rel
        try:
            # No symlink on the way: the scanner's link rules apply to those (a full pass).
            plain = full.is_file() and os.path.realpath(full) == os.path.abspath(full)
        except (OSError, ValueError):
            return False
        if plain and self.indexer.wrote(rel):
            with self.index.read() as r:
                return r.note_by_path(rel) is not None
        return False

    def _filters(
        self,
        tags: Sequence[str] | None,
        folder: str | None,
        since: str | None,
        until: str | None,
    ) -> Filters:
        """Filters from a caller's values; a folder that holds no note is NOT_FOUND (with
        the closest folder names) rather than a silent empty answer."""
        folder = (folder or "").strip().strip("/") or None
        if folder is not None:
            with self.index.read() as r:
                exists = r.folder_exists(folder)
                known = [] if exists else r.folders()
            if not exists:
                import difflib

                close = difflib.get_close_matches(folder.lower(), [k.lower() for k in known], 3)
                names = [k for k in known if k.lower() in close]
                raise NotFound(
                    f"no folder {folder!r} in the vault"
                    + (f"; closest: {', '.join(names)}" if names else ""),
                    folders=names,
                )
        return Filters(
            tuple(clean_tags(tags) or ()),
            folder,
            parse_when("since", since),
            parse_when("until", until, end_of_day=True),
        )

    def get(self, ref: str, *, max_chars: int | None = None) -> NoteView:
        from vault_brain.vault.note import UnreadableNote, parse_note

        self.indexer.refresh_for_read()
        info = self._find(ref)
        try:
            note = parse_note(info.path, self._read(info.path))
        except FileNotFoundError as exc:
            self.indexer.wrote(info.path)  # gone since it was indexed: the index learns it
            raise NotFound(f"{info.path} is no longer in the vault") from exc
        except (OSError, UnreadableNote) as exc:
            raise Unavailable(f"{info.path} cannot be read: {exc}") from exc
        self._seen.gave(info.id, note.version)
        content = note.body
        truncated = max_chars is not None and len(content) > max_chars
        if truncated:
            content = content[:max_chars]
        with self.index.read() as r:
            links = r.links_of(info.rowid)
            backlinks = r.backlinks(info.rowid)
            tier = self._vector_arm.tier(r)[0]  # the tier search reads, else instant
            related = r.related(info.rowid, RELATED_MAX, tuple(dict.fromkeys((tier, INSTANT))))
        links_out: list[NoteRef] = []
        seen: set[str] = set()
        for link in links:
            key = link.target.lower()
            if key in seen:
                continue
            seen.add(key)
            target = link.resolved
            if target is None:
                links_out.append(NoteRef(None, link.target, None))
            else:
                links_out.append(NoteRef(target.id, target.title, target.path))
        return NoteView(
            id=info.id,
            title=note.title,
            path=info.path,
            summary=info.summary,
            tags=list(note.tags),
            aliases=list(note.aliases),
            created=note.created,
            updated=note.updated or info.updated,
            version=note.version,
            content=content,
            truncated=truncated,
            links_out=links_out,
            backlinks=[NoteRef(b.id, b.title, b.path) for b in backlinks],
            related=[RelatedNote(n.id, n.title, one_line(n.summary)) for n in related],
        )

    def list(
        self,
        *,
        folder: str | None = None,
        tags: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> NotePage:
        """Notes newest first (by `updated`, else the file's mtime), a page at a time."""
        self.indexer.refresh_for_read()
        filters = self._filters(tags, folder, since, until)
        with self.index.read() as r:
            rows, next_cursor = r.list_notes(filters, limit, cursor or None)
        notes = [NoteSummary(r.id, r.title, r.path, r.summary, r.updated) for r in rows]
        return NotePage(notes, next_cursor, self.indexer.indexing())

    def status(self) -> Status:
        with self.index.read() as r:
            c = r.counts()
            held = r.vectors_model()
            answering = "+".join(self._vector_arm.tiers(r))
        embedder = self.embedder
        ready = embedder is not None and held is not None and held[0] == embedder.name
        # Another model's vectors do not count: every chunk waits for this one's.
        pending = (c.pending_vectors if ready else c.chunks) if embedder else 0
        errors = {
            "embed": self.indexer.recorded_error("embed") if embedder else None,
            "summary": self.indexer.recorded_error("summary") if self.summarizer else None,
        }
        latest = max((e for e in errors.values() if e), default=None)
        strong_done, strong_total = self.indexer.strong_coverage()
        kernel = self.indexer.strong_kernel() if self.strong else None
        holder = self.indexer.holder()
        backlog = self.indexer.strong_progress() if self.strong else None
        rate = backlog.rate if backlog else None
        return Status(
            vault=str(self.root),
            index_path=self.index.location,
            notes=c.notes,
            chunks=c.chunks,
            vectors=c.vectors if ready else 0,
            pending_vectors=pending,
            pending_summaries=c.pending_summaries if self.summarizer else 0,
            embedding=embedder.name if embedder else None,
            dimension=held[1] if ready and held else None,
            index_bytes=self.index.size_bytes(),
            indexer=self.indexer.live,
            watched=self.indexer.live or (holder is not None and holder.keeps_in_step),
            indexer_pid=holder.pid if holder else None,
            indexer_role=holder.role if holder else None,
            last_error=latest[1] if latest else None,
            embed_error=errors["embed"][1] if errors["embed"] else None,
            summary_error=errors["summary"][1] if errors["summary"] else None,
            summary_model=self.summarizer.name if self.summarizer else None,
            indexing=self.indexer.indexing(),
            strong_model=self.strong.name if self.strong else None,
            strong_vectors=strong_done,
            strong_pending=strong_total - strong_done,
            strong_error=errors_strong[1] if (errors_strong := self._strong_error()) else None,
            strong_kernel=kernel[0] if kernel else None,
            strong_agreement=kernel[1] if kernel else None,
            strong_rate=rate,
            strong_eta_seconds=(
                round((strong_total - strong_done) / rate) if rate and backlog else None
            ),
            vector_tier=answering if embedder is not None else None,
        )

    def _strong_error(self) -> tuple[float, str] | None:
        return self.indexer.recorded_error("strong") if self.strong else None

    def snapshot(self) -> dict[str, list[tuple]]:
        """What a full reindex must reproduce (tests compare two of these)."""
        with self.index.read() as r:
            return r.snapshot()

    def _read(self, rel: str) -> bytes:
        """A note's bytes, never through a symlink out of the vault (vault/reading.py)."""
        return read_note_bytes(self.root, rel, self.settings.vault.follow_outside)

    # -- history -------------------------------------------------------------------------

    def history(self, ref: str) -> tuple[str, list[Version]]:
        """(path, the versions vault-brain writes replaced, newest first) of a note, also
        of one that is gone (give its path)."""
        from vault_brain.vault import history

        path = self._path_of(ref)
        return path, history.list_versions(self.root, path)

    @one_write_at_a_time
    def restore(self, ref: str, name: str, *, version: str | None = None) -> SaveResult:
        """Put a kept version back. `version` is the note's current version as the caller
        read it; None restores a note that is gone. What it replaces is kept in turn.

        A version goes back onto the note whose id it carries: when that note now lives at
        another path (a person renamed it, so its older versions stayed under the old one),
        it is restored there, over that note's current version, never as a second file with
        the same id."""
        from vault_brain.vault import history

        self._check_writable()
        path = self._path_of(ref)
        target = self._holder_elsewhere(path, history.read_version(self.root, path, name))
        written = target or path
        with self.index.note_lock(written):
            if target is not None:
                version = self.current_version(target)
            new_version = history.restore(
                self.root,
                path,
                name,
                version,
                allowed_folders=self.settings.write.allowed_folders,
                to=target,
            )
        indexed = self.indexer.wrote(written)
        with self.index.read() as r:
            info = r.note_by_path(written)
        if info is not None:
            self._seen.wrote(info.id, new_version)
        log.event("restore", path=written, indexed=indexed)
        return SaveResult(info.id if info else "", written, new_version, indexed=indexed)

    def _holder_elsewhere(self, path: str, data: bytes) -> str | None:
        """The path of the note, other than `path`, that holds the id these bytes carry."""
        from vault_brain.vault.note import UnreadableNote, parse_note

        try:
            claimed = parse_note(path, data).id
        except UnreadableNote:
            return None
        with self.index.read() as r:
            holder = r.note_by_id(claimed)
        return holder.path if holder is not None and holder.path != path else None

    def current_version(self, path: str) -> str | None:
        """The version of the file at `path` now, or None when there is none."""
        from vault_brain.vault.note import parse_note

        try:
            return parse_note(path, self._read(path)).version
        except FileNotFoundError:
            return None

    def _path_of(self, ref: str) -> str:
        from vault_brain.vault import history

        try:
            return self._find(ref).path
        except NotFound:
            path = normalize_ref(ref)
            if path and history.list_versions(self.root, path):
                return path  # a note that is gone still has its history
            raise

    # -- writing -----------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.settings.write.read_only:
            raise Forbidden("this brain is read-only (write.read_only = true)")

    def _check(self, field: str, value: str | None, cap: int) -> None:
        check_text(field, value, cap, reject_secrets=self.settings.write.reject_secrets)

    def _check_size(self, data: bytes) -> None:
        """A note over the vault's size cap would be skipped by the indexer, so it would
        vanish from search: refuse the write before the file is touched."""
        cap = self.settings.vault.max_file_bytes
        if len(data) > cap:
            raise InvalidInput(
                f"the note would be {len(data)} bytes, over the size limit of {cap} bytes "
                "(vault.max_file_bytes); split it into several notes"
            )

    def _look_before_saving(self, content: str) -> tuple[NoteInfo | None, str]:
        """(a note whose body is exactly this content, confirmed against its file; an id no
        note holds), from one read of the index. The index may lag a person's edit by a
        moment: a duplicate counts only when its file still holds that body, and then the
        model's text is not saved twice."""
        from vault_brain.vault.note import UnreadableNote, new_id, parse_note

        body = content.strip()
        with self.index.read() as r:
            same = r.note_with_body(text_hash(body)) if body else None
            while r.note_by_id(note_id := new_id()) is not None:
                pass
        if same is None:
            return None, note_id
        try:
            note = parse_note(same.path, self._read(same.path))
        except (OSError, UnreadableNote):
            note = None
        if note is not None and text_hash(note.body.strip()) == text_hash(body):
            return same, note_id
        self.indexer.wrote(same.path)  # the index was behind: bring that note up to date
        return None, note_id

    @one_write_at_a_time
    def save(
        self,
        title: str,
        content: str,
        *,
        summary: str | None = None,
        tags: Sequence[str] = (),
        folder: str | None = None,
    ) -> SaveResult:
        from vault_brain.vault import writer
        from vault_brain.vault.note import file_version
        from vault_brain.vault.render import render_new_note

        self._check_writable()
        title = (title or "").strip()
        if not title:
            raise InvalidInput("title is empty")
        self._check("title", title, TITLE_MAX)
        self._check("content", content, self.settings.write.max_content_chars)
        self._check("summary", summary, SUMMARY_MAX)
        tag_list = clean_tags(tags) or []
        allowed = self.settings.write.allowed_folders
        # With allowed_folders set, a save with no folder goes to the first of them.
        target = folder or (allowed[0] if allowed else "")
        resolve_folder_path(self.root, target, allowed_folders=allowed)  # Forbidden early
        same, note_id = self._look_before_saving(content or "")
        if same is not None:
            self._seen.gave(same.id, same.version)
            return SaveResult(same.id, same.path, same.version, duplicate_of=same.id)
        data = render_new_note(
            id=note_id,
            title=title,
            content=content or "",
            summary=summary or "",
            tags=tag_list,
            now=_now(),
        )
        self._check_size(data)
        rel = writer.create_note_file(self.root, target, title, data, allowed)
        indexed = self.indexer.wrote(rel)
        log.event("save", id=note_id, path=rel, indexed=indexed)
        result = SaveResult(note_id, rel, file_version(data), indexed=indexed)
        if indexed:
            with self.index.read() as r:
                info = r.note_by_path(rel)
            if info is not None:
                result = SaveResult(info.id, rel, info.version)
        self._seen.wrote(result.id, result.version)
        return result

    def _conflict(self, info: NoteInfo, exc: Conflict, version: str) -> Conflict:
        """A refusal that carries what a model needs to merge: the note as it is now (its
        content, capped, and its version), so it never has a reason to retry blind over a
        person's edit; and what differs (`reason`), so it is not told someone edited the
        note when its own update did, or when the version was never the note's."""
        from vault_brain.vault.note import UnreadableNote, parse_note

        cap = CONFLICT_CONTENT_MAX
        try:
            now = parse_note(info.path, self._read(info.path))
        except (OSError, UnreadableNote):
            return exc
        current = {
            "version": now.version,
            "content": now.body[:cap],
            "truncated": len(now.body) > cap,
        }
        reason, retryable, message = self._what_differs(info, version, now.version)
        return Conflict(
            message,
            retryable=retryable,
            reason=reason,
            current_version=now.version,
            current=current,
        )

    def _what_differs(self, info: NoteInfo, version: str, now: str) -> tuple[str, bool, str]:
        """(reason, retryable, message) of a refused write that named `version`."""
        real = self._seen.given(info.id, version) or (
            VERSION.fullmatch(version) is not None
            and any(v.version == version for v in self._kept_versions(info))
        )
        if not real:
            return (
                "unknown_version",
                True,
                f"{version!r} is not a version of this note that vault-brain gave out "
                "(versions are the 12 hex characters memory_get returns: mistyped, made up, "
                "or read before this server restarted?): build on current.content and retry "
                "with current.version",
            )
        if self._seen.last_written(info.id) == now:
            return (
                "your_update",
                True,
                f"the note is at version {now}, written by an earlier update through this "
                f"server (most likely yours) after version {version}: current.content already "
                "holds that update; add only what is still missing and retry with "
                "current.version",
            )
        return (
            "edited",
            False,
            f"the note changed since you read version {version}: someone else (a person or "
            "another client) edited it: merge your change into current.content, then retry "
            "with current.version; do not resend your old text",
        )

    def _kept_versions(self, info: NoteInfo) -> list[Version]:
        from vault_brain.vault import history

        return history.list_versions(self.root, info.path)

    @one_write_at_a_time
    def update(
        self,
        ref: str,
        version: str,
        *,
        content: str | None = None,
        append: str | None = None,
        summary: str | None = None,
        tags: Sequence[str] | None = None,
        title: str | None = None,
    ) -> SaveResult:
        from vault_brain.vault import writer
        from vault_brain.vault.render import render_update

        self._check_writable()
        if not version:
            raise InvalidInput("version is required: get the note first")
        if content is not None and append is not None:
            raise InvalidInput("give content (replace) or append, not both")
        if all(v is None for v in (content, append, summary, tags, title)):
            raise InvalidInput("nothing to update")
        cap = self.settings.write.max_content_chars
        self._check("content", content, cap)
        self._check("append", append, cap)
        self._check("summary", summary, SUMMARY_MAX)
        self._check("title", title, TITLE_MAX)
        if title is not None and not title.strip():
            raise InvalidInput("title is empty")
        tag_list = clean_tags(tags)
        info = self._find(ref)
        # Read, check and write as one step for every process and host on this index.
        with self.index.note_lock(info.path):
            try:
                raw = self._read(info.path)
            except FileNotFoundError as exc:
                self.indexer.wrote(info.path)
                raise NotFound(f"{info.path} is no longer in the vault") from exc
            new = render_update(
                raw,
                content=content,
                append=append,
                summary=summary,
                tags=tag_list,
                title=title.strip() if title else None,
                now=_now(),
                id=info.id,
            )
            self._check_size(new)
            try:
                new_version = writer.replace_note_file(
                    self.root,
                    info.path,
                    version,
                    new,
                    allowed_folders=self.settings.write.allowed_folders,
                )
            except Conflict as exc:
                raise self._conflict(info, exc, version) from None
            self._seen.wrote(info.id, new_version)
            path = info.path
            if title is not None and title.strip() != info.title:
                # The file is named after the title, as a save names it; the id moves with it.
                path = writer.rename_note_file(
                    self.root,
                    info.path,
                    title.strip(),
                    new_version,
                    allowed_folders=self.settings.write.allowed_folders,
                )
        if path != info.path:
            self.indexer.wrote(info.path)
        indexed = self.indexer.wrote(path)
        log.event("update", id=info.id, path=path, indexed=indexed)
        return SaveResult(info.id, path, new_version, indexed=indexed)

    @one_write_at_a_time
    def delete(self, ref: str, version: str) -> Trashed:
        from vault_brain.vault import writer

        self._check_writable()
        if not version:
            raise InvalidInput("version is required: get the note first")
        info = self._find(ref)
        try:
            with self.index.note_lock(info.path):
                trashed = writer.trash_note_file(
                    self.root,
                    info.path,
                    version,
                    allowed_folders=self.settings.write.allowed_folders,
                )
        except Conflict as exc:
            raise self._conflict(info, exc, version) from None
        self.indexer.wrote(info.path)
        log.event("delete", id=info.id, path=info.path, trashed_to=trashed)
        return Trashed(info.id, info.path, trashed)

    # -- importing conversations (importing.py does the work) ---------------------------

    def import_conversations(
        self,
        fmt: str,
        files: Sequence[str],
        *,
        folder: str | None = None,
        dry_run: bool = False,
        merge: bool = False,
    ) -> ImportReport:
        """Chat exports become notes. Raises InvalidExport, with nothing written, for an
        export that cannot be read or is not in the format named."""
        from vault_brain.importing import Importer  # only this command needs it

        if not dry_run:
            self._check_writable()

        def notes() -> list[NoteInfo]:
            self.refresh_if_unwatched(vectors=merge)  # after the files are read: fail fast
            with self.index.read() as r:
                return r.list_notes(Filters(), 2**62, None)[0]

        importer = Importer(
            self.settings,
            notes=notes,
            search=self.search,
            index=self.sync_paths,
            summarizer=self.summarizer,
            note_lock=self.index.note_lock,
        )
        with self._writes:
            return importer.run(fmt, files, folder=folder, dry_run=dry_run, merge=merge)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.indexer.stop()
        self._vector_arm.close()
        self.index.close()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _NotWaiting:
    """The backoff of a process that has embedded nothing: never waiting."""

    def waiting(self) -> bool:
        return False

    def failed(self) -> None:
        pass


def answer_forked(settings: Settings, told: Callable[[], bytes]) -> bytes:
    """In a child forked before its parent made its Brain (oneshot.py): the vector arm's
    answer to the request the parent's Brain tells it (Brain.begin_query), with the
    models a Brain would make from `settings`, their light encoders loaded before it is
    told (for the tiers its own read says will answer), and reads of the index on
    connections of its own (nothing made, moved or written here). Its backoffs wait on
    nothing (it has embedded nothing); the parent takes the answer only on the tiers
    that answer there too."""
    cache = ModelCache.under(settings.embed.cache_dir)
    arm = VectorArm(
        make_embedder(settings.embed),
        _NotWaiting(),
        strong=make_strong_embedder(settings.embed, cache),
        strong_backoff=_NotWaiting(),
        cache=cache,
    )
    index = open_reader(settings)
    with index.read() as reads:
        tiers = arm.tiers(reads)
    for tier in tiers:
        embedder = arm.strong if tier == STRONG else arm.embedder
        load = query_loader(embedder, light=True)
        if load is not None:
            try:
                load()
            except Exception:  # noqa: BLE001 - the arm meets it again, and gives no answer
                pass
    return arm.answer_elsewhere(index.read, told)


def _ambiguous(ref: str, what: str, infos: Sequence[NoteInfo]) -> InvalidInput:
    shown = infos[:CANDIDATES_SHOWN]
    named = "; ".join(f"{i.title!r} (id {i.id}, {i.path})" for i in shown)
    more = " and more" if len(infos) > len(shown) else ""
    return InvalidInput(
        f"{ref!r} is the {what} of {len(infos) if not more else 'several'} notes: "
        f"{named}{more}; give the id or path of the one you mean",
        candidates=[{"id": i.id, "title": i.title, "path": i.path} for i in shown],
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def one_line(text: str, limit: int = ONE_LINE_MAX) -> str:
    """The first line of a summary, cut at a word under `limit` characters (with "…")."""
    line = text.strip().split("\n", 1)[0].strip()
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
