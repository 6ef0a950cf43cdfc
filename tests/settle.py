"""Settling a live watcher: wait until it has handled every file event made so far.

Not a quiet spell (no fixed wait can tell a slow machine from a finished watcher): a marker
note is written, waited for in the index, removed and waited for again. Events reach the
watcher in the order they happened (one inotify queue; watchdog holds a move's first half
back but keeps the order), and a path marked dirty earlier is synced no later than one
marked after it. A polling observer may walk a folder before a change and the marker's
folder after it; the second look (the removal) comes from a later walk, which sees every
earlier change. So once the removal is indexed, so is every change made before the marker.
"""

from __future__ import annotations

import itertools

from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.indexer import Indexer
from vault_brain.service import Brain
from vault_brain.watch import Watcher

MARKER = "Settle marker"
_numbers = itertools.count()


def settle(brain: Brain, watcher: Indexer | Watcher | None = None) -> None:
    """Every file event so far is in `brain`'s index, synced by the watcher that keeps it
    (brain's own indexer unless another is given), and the watcher is idle."""
    watcher = watcher if watcher is not None else brain.indexer
    rel = f"{MARKER} {next(_numbers)}.md"
    path = brain.root / rel
    path.write_text("# marker\n\nwritten by the test to settle the watcher\n", encoding="utf-8")
    wait_until(lambda: indexed(brain, rel), f"{rel} indexed by the watcher")
    path.unlink()
    wait_until(lambda: not indexed(brain, rel), f"{rel} removed by the watcher")
    assert watcher.wait_idle(HANG_SECONDS), "the watcher did not go idle"


def indexed(brain: Brain, rel: str) -> bool:
    """Whether the index holds `rel` (a read of the index only: no catch-up sync)."""
    with brain.index.read() as r:
        return r.note_by_path(rel) is not None


def batches(watcher: Indexer | Watcher) -> list[tuple[str, ...]]:
    """The watcher's recent batches without the settle markers (batches of only those go)."""
    inner = watcher.watcher if isinstance(watcher, Indexer) else watcher
    assert inner is not None, "no watcher runs"
    kept = [tuple(p for p in batch if not p.startswith(MARKER)) for batch in inner.recent_batches]
    return [batch for batch in kept if batch]
