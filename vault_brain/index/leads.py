"""The strong backlog's order (issue 23): every note's lead chunk first, then the rest.

A note's first chunk holds its title and opening lines; with those embedded, the strong
(multilingual) arm names most notes long before it covers every chunk (docs/benchmarks.md,
"Leads first"). `Leads` is the walk's place between batches, kept by the process that
embeds (the Indexer), so that no batch's query walks again over what earlier ones passed.
"""

from __future__ import annotations

from vault_brain.index.records import LeadsFirst, PendingChunk


class Leads:
    """Where a backlog's walk over the notes' lead chunks stands, for the next batch's
    pending_chunks (records.LeadsFirst): past the last lead embedded while leads are left,
    None (the tier's plain order) once a batch found fewer leads than it asked for. The
    caller calls `restart` when notes changed (their new leads may lie anywhere); a change
    it does not see (another process's save) is embedded in the plain order, newest
    first, as soon as the leads it knows of are done."""

    def __init__(self) -> None:
        self.order: LeadsFirst | None = LeadsFirst()

    def restart(self) -> None:
        self.order = LeadsFirst()

    def embedded(self, batch: list[PendingChunk], asked: int, order: LeadsFirst | None) -> None:
        """`batch`, `asked` for in `order`, now has its vectors. A restart meanwhile (a
        sync on another thread) stands: the batch says nothing of the leads it brought."""
        if order is None or self.order is not order:
            return
        leads = [p.rowid for p in batch if p.lead]
        self.order = LeadsFirst(leads[-1]) if len(leads) == asked else None
