"""The Indexer: the only write path into the index, and the one place that decides what
runs next (file events, tool writes, the vector and summary queues).

Who writes the index (docs/ARCHITECTURE.md says it at length):

1. The process that holds the vault's indexer lock (the index's `indexer_lock`: an flock
   beside a SQLite file) runs all background index work: the watcher's syncs and
   reconciles, the vector queue, the summary queue.
2. Any process indexes the files it has itself just written through `vault/` at once, so
   a save is findable when it returns (read-your-writes). That sync is idempotent; the
   lock holder re-checks the same path when its file event arrives.
3. An explicit full pass (`vault-brain index`, `Brain.sync`) takes the lock for its run,
   and a process that reads while nobody holds it (a CLI `search`) may take it for one
   catch-up pass. Neither runs while another process holds the lock.

Every change (a synced file event, a tool write) sends one "changed" signal, which wakes
the background worker: vectors of a saved note are there within a second or two.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vault_brain import log
from vault_brain.backlog import Backlog, BacklogProgress
from vault_brain.config import Settings
from vault_brain.embed.base import Embedder
from vault_brain.embed.cache import ModelCache
from vault_brain.endpoint import waiting_at_most
from vault_brain.errors import Unavailable
from vault_brain.index.leads import Leads
from vault_brain.index.port import Index, Writes
from vault_brain.index.records import INDEX, REFRESH, STRONG, WATCH, Holder
from vault_brain.index.sync import Progress, Syncer, SyncProgress, SyncReport
from vault_brain.records import Indexing

if TYPE_CHECKING:
    from vault_brain.summarize.llm import Summarizer
    from vault_brain.watch import Watcher, WatchStats

BACKOFF_START, BACKOFF_CAP = 30.0, 900.0
LOCK_RETRY_SECONDS = 2.0  # a reader takes over within this long after the indexer dies
IDLE_RETRY_SECONDS = 60.0  # retry pending vectors and summaries this often with no changes
COALESCE_SECONDS = 0.2  # a change's vectors wait this long for the changes that follow it
ERROR_CHECK_SECONDS = 60.0  # how stale a success's look at the recorded failures may be
PROGRESS_EVERY_SECONDS = 1.0  # how often a long pass publishes its progress in the index
# Later passes smaller than this are not worth reporting as "indexing"; a vault's first pass
# is reported whatever its size, from its first moment (answers before it ends are partial).
PROGRESS_MIN_FILES = 50
# The meta key a completed full pass leaves (its time): before it, the index is incomplete.
INDEXED_AT = "indexed_at"
# A first tool call waits for a first pass over at most this many files (seconds of work);
# over a bigger vault it answers at once from what is indexed, and says `indexing`.
FIRST_PASS_WAIT_FILES = 2_000
# A one-shot pass (a CLI read with no watcher) embeds a strong-tier backlog up to this size
# (the notes changed since the last pass, ~2 s of e5 at most), never a larger one.
ONE_SHOT_STRONG_CHUNKS = 64
ONE_SHOT_INSTANT_CHUNKS = 2_000  # ~1 s of the static model
REFRESH_WAIT_SECONDS = 30.0  # an explicit pass waits this long for a read's catch-up pass
# How long a read's catch-up waits for a remote embedding endpoint, per request: what a
# query embedding gets (search/semantic.py), so a hung server costs a CLI search 2 s, not
# the endpoint's timeout (30 s by default).
READ_WAIT_SECONDS = 2.0
# The share of chunks a tier must have vectors for before the vault is calibrated on it
# (search/fit.py): the strong tier answers alone from this share on (search/semantic.py);
# before it, its fit is made once every note's lead is in.
CALIBRATE_COVERAGE = 0.99
# The strong tier's pending chunks per model call: a second or two of e5, so new notes get
# their instant vectors (and the newest notes their strong leads) between calls. `index`
# asks 64 at a time (cli._vector_phase): one call, not two of 32. Each call starts with
# the SQL and the tokenising while both engines wait (~5 ms at 32) and ends with a thread
# waiting for the other's last pass (15-21 ms at 32, of a ~0.55 s call on two cores;
# docs/benchmarks.md, "The e5 tier's rate, round 9").
STRONG_BATCH = 64
# What a failing endpoint raises; anything else is a bug and propagates.
ENDPOINT_ERRORS = (Unavailable, OSError, ValueError, RuntimeError)


@dataclass
class Backoff:
    """When a background kind (vectors, summaries) may call its endpoint again: 30 s after
    a failure, doubling to 15 min; a success resets it. Tests shorten `start`."""

    start: float = BACKOFF_START
    cap: float = BACKOFF_CAP
    delay: float = 0.0
    retry_at: float = 0.0

    def waiting(self) -> bool:
        return time.monotonic() < self.retry_at

    def remaining(self) -> float:
        return max(0.0, self.retry_at - time.monotonic())

    def failed(self) -> float:
        self.delay = min(self.delay * 2 if self.delay else self.start, self.cap)
        self.retry_at = time.monotonic() + self.delay
        return self.delay

    def succeeded(self) -> None:
        self.delay = self.retry_at = 0.0


class Indexer:
    """Keeps one vault's index in step with its files, from this process."""

    def __init__(
        self,
        settings: Settings,
        index: Index,
        embedder: Embedder | None,
        summarizer: Summarizer | None,
        strong: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.index = index
        self.embedder = embedder
        self.strong = strong  # the strong tier, embedding in the background after the instant one
        self.summarizer = summarizer
        self.lock = index.indexer_lock
        self.lock_retry_seconds = LOCK_RETRY_SECONDS
        self.health_check_seconds: float | None = None  # None: the watcher's default
        self.embed_backoff = Backoff()
        self.strong_backoff = Backoff()
        self.summary_backoff = Backoff()
        self._syncer = Syncer(index, settings, summarize=summarizer is not None, instant=embedder)
        self._summaries = None
        if summarizer is not None:
            from vault_brain.summarize.queue import SummaryQueue

            self._summaries = SummaryQueue(index, settings, summarizer, self.sync_paths)
        self._role = "stopped"  # "indexer" | "reader" | "stopped"
        self._role_lock = threading.Lock()
        self._watcher: Watcher | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._background_busy = False
        self._error_checked: dict[str, float] = {}  # kind -> when its record was last clear
        # One full pass at a time in this process; small syncs (events, tool writes) may
        # run between its transactions, so a save is indexed at once even during a long pass.
        self._pass_lock = threading.Lock()
        self._last_sync = 0.0
        self._synced = threading.Event()  # a full stat pass has completed in this process
        self._indexed_once = False  # the index is known to have completed a full pass
        self._progress_published = 0.0
        self._checked = False  # the index was checked for damage (repair) in this process
        self._kernel_recorded: str | None = None  # the strong kernel this process recorded
        # The strong tier's backlog, told in log lines and a record `status` reads.
        self.strong_backlog = Backlog("strong", self.strong_coverage, self._publish_backlog)
        # It embeds every note's lead chunk (title, opening lines) before the rest: the
        # strong arm can name most notes long before it covers every chunk (issue 23;
        # docs/benchmarks.md, "Leads first"). Restarted when this process changes notes.
        self._strong_leads = Leads()

    # -- role ----------------------------------------------------------------------------

    @property
    def role(self) -> str:
        return self._role

    @property
    def live(self) -> bool:
        """This process indexes the vault from file events right now."""
        return self._role == "indexer"

    @property
    def watcher(self) -> Watcher | None:
        return self._watcher

    def watched(self) -> bool:
        """Some process (this one or another) keeps the index in step right now: a watcher,
        not an `index` run (which holds the lock only until it ends)."""
        if self.live:
            return True
        holder = self.lock.holder()
        return holder is not None and holder.keeps_in_step

    def holder(self) -> Holder | None:
        """The process holding the indexer role (maybe this one), or None."""
        return self.lock.holder()

    def start(self) -> None:
        """Take the indexer role if the lock is free, else wait for it as a reader (a thread
        retries every lock_retry_seconds and takes over when the holder is gone)."""
        with self._role_lock:
            if self._role != "stopped":
                return
            self._stop.clear()
            if self.lock.try_acquire(WATCH):
                self._become_indexer()
                return
            self._role = "reader"
            log.event("watch_reader", lock=self.lock.where)
            self._spawn(self._wait_for_role, "vault-brain-lock-retry")

    def stop(self, timeout: float | None = None) -> None:
        """Stop watching (syncing every path still pending) and give up the role."""
        self.strong_backlog.paused()
        with self._role_lock:
            if self._role == "stopped":
                return
            self._stop.set()
            self._changed.set()
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop(timeout)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []
        self.index.maintain_in_background(False)  # commits do the chores again
        self.lock.release()
        self._role = "stopped"
        log.event("watch_stopped")

    def __enter__(self) -> Indexer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_for_role(self) -> None:
        while not self._stop.wait(self.lock_retry_seconds):
            try:
                got = self.lock.try_acquire(WATCH)
            except Exception as exc:  # an unreadable index folder: keep reading, retry later
                log.warn("watch_lock_error", error=log.cut(str(exc), 200))
                continue
            if not got:
                continue
            with self._role_lock:
                if self._stop.is_set():
                    self.lock.release()
                    return
                log.event("watch_takeover", lock=self.lock.where)
                self._become_indexer()
            return

    def _become_indexer(self) -> None:
        from vault_brain.watch import Watcher  # watchdog loads only where a watcher runs

        self._role = "indexer"
        options = {}
        if self.health_check_seconds is not None:
            options["health_check_seconds"] = self.health_check_seconds
        watcher = Watcher(self, self.settings, index_folder=self.index.folder, **options)
        self._watcher = watcher
        watcher.start()  # its first job is a full reconcile
        self.index.maintain_in_background()  # _run_background does the chores after writes
        self._spawn(self._run_background, "vault-brain-background")
        log.event(
            "watch_started",
            role="indexer",
            poll=self.settings.watch.poll,
            debounce_ms=self.settings.watch.debounce_ms,
        )

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- the write path --------------------------------------------------------------------

    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        """A full stat pass (incremental; `full` re-parses every note), under the lock.
        `stop`, once set, ends it after the batch being stored (`report.stopped`)."""
        with self._pass_lock, self.exclusive():
            if not self._checked:
                full = self._repair_if_damaged() or full
            report = self._full_pass(full=full, progress=progress, stop=stop)
        if report.changed:
            self._strong_leads.restart()
        self._changed.set()
        log.event(
            "sync", scanned=report.scanned, **report.counts(), skipped=report.skipped, ms=report.ms
        )
        return report

    def _repair_if_damaged(self) -> bool:
        """Once per process, before its first full pass (and again after a read met
        damage): the index's own check (Index.repair; SQLite: FTS5's integrity check).
        Damaged pages give wrong answers silently, so what is damaged is emptied and the
        pass becomes a full rebuild."""
        self._checked = True
        return self.index.repair(self._rebuilding)

    def _rebuilding(self, w: Writes) -> None:
        """Until the pass that refills the emptied full text ends, searches say `indexing`
        (with the emptying, in its transaction): a partial answer is never taken whole."""
        w.set_meta("indexing", json.dumps({"done": 0, "total": w.counts().notes}))

    def damaged(self) -> bool:
        """A read met damage. Where this process may index now (no watcher here or in another
        process: a CLI command), rebuild at once and return True, so the read can run again;
        else the indexer's next pass does (soon when this process runs the watcher)."""
        self._checked = False
        watcher = self._watcher
        if watcher is not None:
            watcher.request_reconcile("index_damaged")
            return False
        if self._role != "stopped":
            return False  # a reader: the process holding the lock rebuilds
        try:
            self.sync()
        except Unavailable as exc:
            log.warn("index_repair_deferred", error=log.cut(exc.message, 200))
            return False
        return True

    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Re-check these paths (vault-relative or absolute; files or folders, present or
        gone). The watcher's batches come here, and so do re-checks after a failed write."""
        rels = [rel for rel in (self._relative(p) for p in paths) if rel is not None]
        report = self._syncer.sync_paths(rels)
        if report.changed:
            self._strong_leads.restart()
        # Another process may have indexed these files already (its own save): there may be
        # vectors to make all the same.
        self._changed.set()
        if report.changed:
            log.event("sync_paths", paths=len(rels), **report.counts(), ms=report.ms)
        return report

    def wrote(self, rel: str) -> bool:
        """A tool write just landed in the vault: index that file now (read-your-writes).

        The file is the truth and it is on disk: an index that cannot take it now (full
        disk, I/O error) must not turn the write into a failure a model would retry; the
        next sync catches up. Returns whether it is indexed."""
        try:
            self._syncer.sync_paths([rel])
        except (Unavailable, OSError) as exc:
            log.warn("index_write_failed", path=log.cut(rel), error=log.cut(str(exc), 200))
            return False
        self._strong_leads.restart()
        self._changed.set()
        return True

    def refresh_for_read(self) -> None:
        """Fresh reads without a daemon: when nobody keeps the index in step, a stat pass
        before a read if the last one is older than index.fresh_read_seconds."""
        if self.live:
            return
        if time.monotonic() - self._last_sync < self.settings.index.fresh_read_seconds:
            return
        self.catch_up_if_unwatched(vectors=False)

    def catch_up_if_unwatched(self, *, vectors: bool = True) -> bool:
        """When no process holds the indexer lock, take it for one pass (files, then
        vectors). Returns True when it did; False at once when a pass is already running
        here or another process indexes the vault (a read never waits for a pass)."""
        if self.live or not self._pass_lock.acquire(blocking=False):
            return False
        try:
            if self.lock.held:
                return False
            try:
                if not self.lock.try_acquire(REFRESH):
                    return False
            except Unavailable:
                return False
            try:
                self._full_pass()
                if vectors:
                    # A read waits for a remote model as long as a query embedding does.
                    with waiting_at_most(READ_WAIT_SECONDS):
                        self.embed_pending(
                            limit=ONE_SHOT_INSTANT_CHUNKS, strong_limit=self._strong_top_up()
                        )
            except Unavailable as exc:
                # A read still answers from the index as it is (read-only, full disk).
                log.warn("index_refresh_failed", error=log.cut(exc.message, 200))
                return False
            finally:
                self.lock.release()
            return True
        finally:
            self._pass_lock.release()

    def _full_pass(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        """A stat pass over the whole vault (the caller holds the indexer lock). A vault's
        first pass publishes its progress from its first moment, whatever its size, and
        the first pass that completes (and each full one) records when (INDEXED_AT): until
        one has, answers are partial and say so."""
        first = full or not self.indexed_once()
        if first:
            self._publish_progress(Indexing(0, 0))  # counting the files
        try:
            report = self._syncer.sync_all(
                full=full, progress=self._tracking(progress, first), stop=stop
            )
            if report.stopped:
                return report  # not a completed pass: the index is still partial
            with self.index.read() as r:
                recorded = r.get_meta(INDEXED_AT) is not None
            if full or not recorded:
                # Once is enough: a pass that wrote it every time made every one-shot
                # search of an unchanged vault a write transaction (four fsyncs).
                with self.index.transaction() as w:
                    w.set_meta(INDEXED_AT, str(round(time.time(), 3)))
            self._indexed_once = True
        finally:
            self._publish_progress(None)
        self._last_sync = time.monotonic()
        self._synced.set()
        return report

    def indexed_once(self) -> bool:
        """The index holds a completed full pass over the vault (made by any process)."""
        if not self._indexed_once:
            with self.index.read() as r:
                self._indexed_once = r.get_meta(INDEXED_AT) is not None
        return self._indexed_once

    def _strong_top_up(self) -> int:
        """How many strong vectors a one-shot pass embeds: all of a small backlog (the notes
        changed since the last pass, so a covered vault stays covered), none of a large one:
        that is minutes of e5 for `index` or the watcher, and 256 chunks of it made every
        CLI search on a half-embedded cpp-docs take 4 s. The instant tier answers meanwhile."""
        if self.strong is None:
            return 0
        with self.index.read() as r:
            backlog = r.strong_backlog(ONE_SHOT_STRONG_CHUNKS)
        return backlog if backlog <= ONE_SHOT_STRONG_CHUNKS else 0

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the indexer role for an explicit run (`vault-brain index`: its pass and its
        vectors), so nothing else indexes meanwhile and `status` says an index run is in
        progress. Raises Unavailable, naming the holder, when another process holds it."""
        if self.lock.held:
            yield
            return
        deadline = time.monotonic() + REFRESH_WAIT_SECONDS
        while not self.lock.try_acquire(INDEX):
            holder = self.lock.holder()
            # A search's catch-up pass ends in a moment: wait for it rather than refuse; so
            # for a holder with no role yet (it writes its record just after taking the lock).
            passing = holder is None or holder.role in (REFRESH, None)
            if passing and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise Unavailable(_held_elsewhere(holder))
        try:
            yield
        finally:
            self.lock.release()

    def _relative(self, path: str) -> str | None:
        root = self.settings.vault_path
        candidate = Path(path)
        if not candidate.is_absolute():
            return path
        try:
            return candidate.resolve().relative_to(root).as_posix()
        except ValueError:
            try:
                return candidate.relative_to(root).as_posix()
            except ValueError:
                return None

    # -- progress --------------------------------------------------------------------------

    def wait_until_indexed(self, timeout: float) -> bool:
        """True once the index holds a completed full pass (this process's or another's);
        False at `timeout`, or at once when the first pass running is over more than
        FIRST_PASS_WAIT_FILES files (answers then come from what is indexed, and say so)."""
        deadline = time.monotonic() + timeout
        while not self._synced.is_set() and not self.indexed_once():
            state = self.indexing()
            if state is not None and state.total > FIRST_PASS_WAIT_FILES:
                return False
            if time.monotonic() >= deadline:
                return False
            self._synced.wait(0.05)
        return True

    def indexing(self) -> Indexing | None:
        """The pass in progress whose answers are partial (in any process), or None: a
        first pass from its start (`total` is 0 while the files are being counted), a
        later one over PROGRESS_MIN_FILES files or more. Before any pass has completed
        and while some process holds the indexer role, the index is incomplete too
        (`Indexing(0, 0)`). A record left by a process that died mid-pass is ignored once
        no process holds the lock."""
        with self.index.read() as r:
            raw = r.parsed_meta("indexing", lambda value: value)  # remembered: every search asks
            complete = self._indexed_once or r.get_meta(INDEXED_AT) is not None
        if complete:
            self._indexed_once = True
        if raw is None and complete:
            return None
        if not self.live and not self.lock.taken():
            return None
        if raw is None:
            return Indexing(0, 0)  # never indexed; the indexer is about to start
        try:
            record = json.loads(raw)
            return Indexing(int(record["done"]), int(record["total"]))
        except (ValueError, TypeError, KeyError):
            return None

    def _tracking(self, progress: Progress | None, first: bool = False) -> Progress:
        def track(p: SyncProgress) -> None:
            big = first or p.total >= PROGRESS_MIN_FILES
            if p.phase == "parse" and big and p.done < p.total:
                due = time.monotonic() - self._progress_published >= PROGRESS_EVERY_SECONDS
                if p.done == 0 or due:
                    self._publish_progress(Indexing(p.done, p.total))
            if progress is not None:
                progress(p)

        return track

    def _publish_progress(self, state: Indexing | None) -> None:
        self._progress_published = time.monotonic()
        value = None if state is None else json.dumps({"done": state.done, "total": state.total})
        try:
            with self.index.read() as r:
                if value is None and r.get_meta("indexing") is None:
                    return
            with self.index.transaction() as w:
                w.set_meta("indexing", value)
        except Unavailable as exc:
            log.warn("progress_not_recorded", error=type(exc).__name__)

    # -- background: vectors and summaries -------------------------------------------------

    def embed_pending(self, *, limit: int | None = None, strong_limit: int | None = 0) -> int:
        """Catch vectors up: the instant tier first (up to `limit`), then the strong tier
        (up to `strong_limit`; None: all, 0: none). Returns how many were written. A
        failing model or endpoint is backed off (30 s doubling to 15 min) and recorded; it
        never raises."""
        return self._embed_round(limit, strong_limit)[0]

    def _embed_round(self, limit: int | None, strong_limit: int | None) -> tuple[int, bool]:
        """(vectors written, whether a tier stopped at its limit with chunks maybe left)."""
        batch = self.settings.embed.batch_size * max(1, self.settings.embed.concurrency) * 4
        written, more = self._embed_tier("instant", self.embedder, self.embed_backoff, batch, limit)
        if self.strong is not None and strong_limit != 0:
            strong, strong_more = self._embed_tier(
                "strong", self.strong, self.strong_backoff, STRONG_BATCH, strong_limit
            )
            written, more = written + strong, more or strong_more
        return written, more

    def calibrate(self, *, force: bool = False, partial: bool = False) -> list[str]:
        """Fit the vault's own calibration (search/fit.py) for each tier whose vectors
        cover the vault, when it has none for that model, the vault changed size by a
        tenth since, or the fit was made on part of the vectors (`force`: fit anyway).
        The strong tier is fitted too once every note's lead chunk is in (this process's
        walk, index/leads.py, found none left): it answers from its fit on, beside the
        instant tier (search/semantic.py), and is fitted again as it covers more and at
        full coverage. `partial`: only that fit of the strong tier's part (what the
        backlog asks for between batches; a complete tier is fitted where it was before:
        `index`'s calibrate phase, the watcher once its work is done). Returns the tiers
        fitted. A model or endpoint that fails is recorded like a failed embedding; it
        never raises."""
        from vault_brain.search.fit import Fit, fit_tier, meta_key

        fitted = []
        for name, embedder, backoff in (
            ("instant", self.embedder, self.embed_backoff),
            ("strong", self.strong, self.strong_backoff),
        ):
            if embedder is None or backoff.waiting() or (partial and name != "strong"):
                continue
            with self.index.read() as r:
                held = r.vectors_model(name)
                counts = r.counts()
                fit = Fit.from_json(r.get_meta(meta_key(name)))
            if held is None or held[0] != embedder.name or not counts.chunks:
                continue
            done = counts.vectors if name == "instant" else counts.strong_vectors
            leads_in = name == "strong" and self._strong_leads.order is None
            complete = done >= CALIBRATE_COVERAGE * counts.chunks
            part = leads_in and not complete  # the strong tier's part, every lead in
            if not (part or (complete and not partial)):
                continue  # the fit waits for the vectors it measures
            coverage = done / counts.chunks
            if fit is not None and not force and not fit.due(embedder.name, counts.notes, coverage):
                continue
            started = time.perf_counter()
            try:
                new = fit_tier(
                    self.index, embedder, name, ModelCache.under(self.settings.embed.cache_dir)
                )
            except ENDPOINT_ERRORS as exc:
                self._failed("embed" if name == "instant" else "strong", backoff, exc)
                continue
            if new is None:
                continue
            with self.index.transaction() as w:
                w.set_meta(meta_key(name), new.to_json())
            fitted.append(name)
            log.event(
                "calibrated",
                tier=name,
                notes=new.notes,
                languages=len(new.tops),
                ms=round((time.perf_counter() - started) * 1000),
            )
        return fitted

    def strong_coverage(self) -> tuple[int, int]:
        """(chunks the strong tier has embedded, all chunks); (0, 0) with no strong tier.
        Vectors of another strong model count as none."""
        if self.strong is None:
            return 0, 0
        with self.index.read() as r:
            counts = r.counts()
            held = r.vectors_model(STRONG)
        if held is None or held[0] != self.strong.name:
            return 0, counts.chunks
        return counts.strong_vectors, counts.chunks

    def _embed_tier(
        self,
        name: str,
        embedder: Embedder | None,
        backoff: Backoff,
        batch: int,
        limit: int | None,
    ) -> tuple[int, bool]:
        """(vectors written, whether it stopped at `limit` rather than on an empty queue)."""
        if embedder is None or backoff.waiting() or limit == 0:
            return 0, False
        from vault_brain.index.vectors import embed_batch

        kind = "embed" if name == "instant" else "strong"
        leads = None
        if name == "strong":
            self.strong_backlog.begin(embedder.name)
            leads = self._strong_leads
        written, dry = 0, False
        try:
            while limit is None or written < limit:
                size = batch if limit is None else min(batch, limit - written)
                n = embed_batch(self.index, embedder, size, name, leads=leads)
                written += n
                if n < size:  # the queue ran dry: no second look at an empty one
                    dry = True
                    break
        except ENDPOINT_ERRORS as exc:
            self._failed(kind, backoff, exc)
            return written, False
        self._succeeded(kind, backoff)
        if name == "strong":
            if written:
                self._record_kernel(embedder)
            self.strong_backlog.worked(written, dry=dry)
            if written and leads is not None and leads.order is None:
                # Every lead is in: fit the vectors present (once, then again as they
                # cover more, Fit.due), so the strong tier answers now
                # (search/semantic.py) with a cut-off measured on them.
                self.calibrate(partial=True)
        return written, limit is not None and written >= limit

    def _record_kernel(self, embedder: Embedder) -> None:
        """Say in the index which kernel made the strong vectors (status shows it in every
        process), when it is not what is recorded already."""
        kernel = getattr(embedder, "kernel", None)
        if kernel is None:
            return
        agreement = getattr(embedder, "agreement", None)
        record = json.dumps({"kernel": kernel, "agreement": agreement})
        if self._kernel_recorded == record:
            return
        try:
            with self.index.transaction() as w:
                w.set_meta("strong_kernel", record)
            self._kernel_recorded = record
        except Unavailable as exc:
            log.warn("kernel_not_recorded", error=type(exc).__name__)

    def _publish_backlog(self, state: BacklogProgress | None) -> None:
        """Best effort: a record `status` cannot read only means it shows no pace."""
        try:
            with self.index.transaction() as w:
                w.set_meta("strong_progress", state.dumps() if state is not None else None)
        except Exception as exc:  # a full disk, or an index closed under a stopping server
            log.warn("progress_not_recorded", error=type(exc).__name__)

    def strong_progress(self) -> BacklogProgress | None:
        """The strong tier's backlog as the process working on it last recorded it (rate,
        time left), or None when no process is working on one now."""
        with self.index.read() as r:
            state = BacklogProgress.loads(r.get_meta("strong_progress"))
        if state is None:
            return None
        holder = self.lock.holder()
        return state if holder is not None and state.fresh(holder.pid) else None

    def strong_kernel(self) -> tuple[str, float | None] | None:
        """(kernel, agreement) of the strong tier: this process's when its model is loaded,
        else what the process that embedded last recorded; None when unknown."""
        kernel = getattr(self.strong, "kernel", None)
        if kernel is not None:
            return kernel, getattr(self.strong, "agreement", None)
        with self.index.read() as r:
            raw = r.get_meta("strong_kernel")
        try:
            record = json.loads(raw) if raw else None
            return (str(record["kernel"]), record.get("agreement")) if record else None
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def summarize_pending(self, *, limit: int | None = None) -> int:
        """Catch LLM summaries up; returns how many notes left the queue. Same back-off as
        vectors; never raises."""
        if self._summaries is None or self.summary_backoff.waiting():
            return 0
        done, failure = self._summaries.run(limit)
        if failure is not None:
            self._failed("summary", self.summary_backoff, failure)
        else:
            self._succeeded("summary", self.summary_backoff)
        return done

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Until the watcher has nothing pending and the background worker sleeps."""
        deadline = time.monotonic() + timeout
        watcher = self._watcher
        if watcher is not None and not watcher.wait_idle(timeout):
            return False
        while self._background_busy or self._changed.is_set():
            if self._role != "indexer" or time.monotonic() >= deadline:
                return not self._background_busy
            time.sleep(0.01)
        return True

    def stats(self) -> WatchStats | None:
        return self._watcher.stats() if self._watcher is not None else None

    def _run_background(self) -> None:
        self._tidy_up()
        while not self._stop.is_set():
            wait = IDLE_RETRY_SECONDS
            for backoff in (self.embed_backoff, self.strong_backoff, self.summary_backoff):
                if backoff.waiting():
                    wait = min(wait, backoff.remaining() + 0.05)
            if self._changed.wait(wait):
                # Let a burst of saves land first: one pass then embeds them all in one
                # write, instead of one per save competing with the saves for the index.
                self._stop.wait(COALESCE_SECONDS)
            if self._stop.is_set():
                return
            self._background_busy = True
            self._changed.clear()
            try:
                while not self._stop.is_set():
                    _, more = self._embed_round(self.settings.embed.batch_size * 4, 32)
                    if not self._stop.is_set():
                        more |= self.summarize_pending(limit=4) >= 4  # LLM calls take seconds
                    self._maintain()
                    if not more:  # a change signal meanwhile wakes the loop again
                        if not self._stop.is_set():
                            self.calibrate()  # the vectors are in: measure the vault (if due)
                        break
            except Exception as exc:  # a bug must not kill the worker: log it, retry later
                log.warn(
                    "background_failed", error=type(exc).__name__, message=log.cut(str(exc), 200)
                )
                self._stop.wait(1.0)
            finally:
                self._background_busy = False

    def _maintain(self) -> None:
        """The index's routine chores (SQLite: copy the WAL the saves and syncs wrote into
        the database), here rather than in a save's commit (see
        Index.maintain_in_background); a failure only means they wait for the next round,
        so it is logged, not raised."""
        try:
            self.index.maintain()
        except Unavailable as exc:
            log.warn("maintenance_failed", error=log.cut(exc.message, 200))

    def _tidy_up(self) -> None:
        """Once the role is ours: temp files left by killed saves (they hold full note
        text) go, and the kept history is bounded."""
        from vault_brain.vault import history, writer

        try:
            removed = writer.clean_stale_temps(self.settings.vault_path)
            if removed:
                log.event("stale_temps_removed", files=removed)
            history.prune(self.settings.vault_path)
        except OSError as exc:
            log.warn("tidy_up_failed", error=log.cut(str(exc), 200))

    # -- errors, recorded in the index so `status` in any process sees them ----------------

    def _failed(self, kind: str, backoff: Backoff, exc: Exception) -> None:
        message = f"{exc.__class__.__name__}: {exc}"[:300]
        delay = backoff.failed()
        self._error_checked.pop(kind, None)  # the next success clears the record at once
        log.warn(f"{kind}_failed", error=message, retry_in_s=delay)
        record = json.dumps({"message": message, "at": time.time()})
        try:
            with self.index.transaction() as w:
                w.set_meta(f"{kind}_error", record)
        except Unavailable as db_exc:
            log.warn("error_not_recorded", kind=kind, error=type(db_exc).__name__)

    def _succeeded(self, kind: str, backoff: Backoff) -> None:
        """Clear a recorded failure of `kind`. Checked at most every ERROR_CHECK_SECONDS
        while nothing failed here: a failure another process records meanwhile is cleared
        by then; a save's vectors need not read the error record each time."""
        backoff.succeeded()
        now = time.monotonic()
        if now - self._error_checked.get(kind, -ERROR_CHECK_SECONDS) < ERROR_CHECK_SECONDS:
            return
        try:
            with self.index.read() as r:
                recorded = r.get_meta(f"{kind}_error") is not None
            if recorded:
                with self.index.transaction() as w:
                    w.set_meta(f"{kind}_error", None)
            self._error_checked[kind] = now
        except Unavailable as db_exc:
            log.warn("error_not_cleared", kind=kind, error=type(db_exc).__name__)

    def recorded_error(self, kind: str) -> tuple[float, str] | None:
        """(when, message) of the last failure of `kind` ("embed", "summary"), if any."""
        with self.index.read() as r:
            raw = r.get_meta(f"{kind}_error")
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return float(record["at"]), str(record["message"])
        except (ValueError, TypeError, KeyError):
            return 0.0, raw


def _held_elsewhere(holder: Holder | None) -> str:
    """Why an explicit pass cannot run now, naming the process that holds the role."""
    pid = f" (pid {holder.pid})" if holder is not None and holder.pid else ""
    if holder is not None and holder.role == INDEX:
        return (
            f"a `vault-brain index` run{pid} is indexing this vault; wait for it to end "
            "(or stop it), then run this again"
        )
    if holder is not None and holder.role == REFRESH:
        return (
            f"a vault-brain search or get{pid} is catching the index up; run this again in a moment"
        )
    return (
        f"another vault-brain process, a watch or serve{pid}, indexes this vault and keeps "
        "the index in step; stop it to run this pass here"
    )
