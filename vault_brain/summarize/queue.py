"""The summary queue: notes without a frontmatter summary → an LLM → the index (and, with
summary.write_back, the note's frontmatter).

A summary describes the version it was made from: it is stored only while the index still
holds that version, and written back only as a conditional write on that version, never
over a newer edit. The Indexer runs this in the background and records failures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from vault_brain import log
from vault_brain.config import Settings
from vault_brain.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable
from vault_brain.index.port import Index
from vault_brain.index.records import PendingSummary
from vault_brain.vault import writer
from vault_brain.vault.note import UnreadableNote, parse_note
from vault_brain.vault.reading import read_note_bytes
from vault_brain.vault.render import render_update

if TYPE_CHECKING:
    from vault_brain.summarize.llm import Summarizer

# What a failing endpoint raises; anything else is a bug and propagates.
ENDPOINT_ERRORS = (Unavailable, OSError, ValueError, RuntimeError)


@dataclass(frozen=True)
class _Source:
    """What a summary is made from, and the exact bytes a write-back is conditional on."""

    title: str
    body: str
    raw: bytes


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SummaryQueue:
    def __init__(
        self,
        index: Index,
        settings: Settings,
        summarizer: Summarizer,
        resync: Callable[[Iterable[str]], object],
    ) -> None:
        self.index = index
        self.settings = settings
        self.summarizer = summarizer
        self._resync = resync  # re-index paths that changed under us (the Indexer's sync)

    def run(self, limit: int | None = None) -> tuple[int, Exception | None]:
        """Summarise pending notes; returns (notes that left the queue, the first failure)."""
        self._queue_for_new_summarizer()
        done, after = 0, 0
        failure: Exception | None = None
        workers = max(1, self.summarizer.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="summary") as pool:
            while limit is None or done < limit:
                size = workers * 2 if limit is None else min(workers * 2, limit - done)
                with self.index.read() as r:
                    batch = r.pending_summaries(after, size)
                if not batch:
                    break
                after = batch[-1].rowid
                sources = [self._source(p) for p in batch]
                jobs = [(p, s) for p, s in zip(batch, sources, strict=True) if s is not None]
                summarize = self.summarizer.summarize
                futures = [pool.submit(summarize, s.title, s.body) for _, s in jobs]
                answered = 0
                for (pending, source), future in zip(jobs, futures, strict=True):
                    try:
                        summary = future.result()
                    except ENDPOINT_ERRORS as exc:
                        failure = failure or exc
                        continue
                    answered += 1
                    done += self._keep(pending, source.raw, summary)
                if jobs and not answered:
                    break  # the endpoint is down or wrong: stop here, keep what is done
                # Some answered: the endpoint works, so one note's failure does not stop the
                # pass; that note is retried after the back-off.
        return done, failure

    def _queue_for_new_summarizer(self) -> None:
        """Summaries just turned on, or another model: queue every note without a
        frontmatter summary (older LLM summaries serve until the new ones arrive)."""
        name = self.summarizer.name
        with self.index.read() as r:
            if r.get_meta("summary_model") == name:
                return
        with self.index.transaction() as w:
            queued = w.queue_all_summaries()
            w.set_meta("summary_model", name)
        if queued:
            log.event("summaries_queued", model=name, notes=queued)

    def _source(self, pending: PendingSummary) -> _Source | None:
        """The note as the index knows it, or None when the file moved on (then it is
        re-indexed, which re-queues or drops it)."""
        try:
            vault = self.settings.vault
            raw = read_note_bytes(self.settings.vault_path, pending.path, vault.follow_outside)
            note = parse_note(pending.path, raw)
        except (OSError, UnreadableNote):
            self._resync([pending.path])
            return None
        if note.version != pending.version:
            self._resync([pending.path])
            return None
        return _Source(pending.title, note.body, raw)

    def _keep(self, pending: PendingSummary, raw: bytes, summary: str) -> int:
        """Write the summary back into the note (when configured) or store it in the index;
        1 when the note left the queue, 0 when it changed meanwhile."""
        if self._may_write_back(pending.path):
            try:
                new = render_update(raw, summary=summary, now=_now())
                with self.index.note_lock(pending.path):  # one writer per note, every host
                    writer.replace_note_file(
                        self.settings.vault_path,
                        pending.path,
                        pending.version,
                        new,
                        allowed_folders=self.settings.write.allowed_folders,
                    )
            except (Conflict, NotFound):
                # Edited or gone since we read it: drop this summary; the sync re-queues.
                log.event("summary_dropped", path=pending.path, reason="changed")
                self._resync([pending.path])
                return 0
            except (InvalidInput, Forbidden, OSError) as exc:
                # Frontmatter we cannot edit safely: keep the summary in the index only.
                log.warn("summary_write_back_skipped", path=pending.path, error=type(exc).__name__)
            else:
                self._resync([pending.path])
                log.event("summary_written", path=pending.path)
                return 1
        with self.index.transaction() as w:
            stored = w.set_llm_summary(
                pending.rowid, pending.version, summary, self.summarizer.name
            )
        return 1 if stored else 0

    def _may_write_back(self, rel: str) -> bool:
        w = self.settings.write
        if not self.settings.summary.write_back or w.read_only:
            return False
        folders = [f.strip("/") for f in w.allowed_folders if f.strip("/")]
        return not folders or any(rel.startswith(f + "/") for f in folders)
