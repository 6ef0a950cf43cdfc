"""The vector arm of a one-shot CLI search, begun in a forked child before the Brain opens.

`cli_search.run` forks it as soon as it knows the settings and that no watcher or server
will answer, before it imports the service's modules: the child imports numpy (the longest
step of its way, ~45-55 ms) and only the modules of the vector arm (`_answer`: the arm, the
embedders, the index's reader; ~10 ms, while this process imports the whole service beside
it), and loads the light encoders of the tiers its own read of the index says will answer,
while this process makes the Brain and opens the index. The Brain then tells it the
search's request (Brain.begin_query, search/semantic.py begin_early) and the child answers
it on connections it opened itself (it shares no connection, file or thread with this
process), as a child the Brain forks itself would. Which answer is taken, and when not, is
search/semantic.py's; the child makes its arm from the settings as service.Brain makes its
own.

Forked after the service's import instead, the child inherited those modules, but its chain
began ~12 ms later, by the part of the service it never uses (the indexer, the sync, the
full-text arm, the pipeline): docs/benchmarks.md, "The first search, round 9".
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from vault_brain.config import is_server_url
from vault_brain.embed.early import Early, can_fork

if TYPE_CHECKING:
    from collections.abc import Callable

    from vault_brain.config import Settings


def begin(settings: Settings, mode: str | None) -> Early | None:
    """The child, when a search in this mode may use one (a vector arm of in-process
    models, a second core); the caller hands it to Brain.begin_query, or discards it."""
    if (mode or settings.search.mode) == "fts" or settings.embed.provider != "local":
        return None
    if is_server_url(settings.index_location):  # a server's index: no reader for a child
        return None
    if not can_fork():
        return None
    return Early(lambda told: _work(settings, told))


def _work(settings: Settings, told: Callable[[], bytes]) -> bytes:
    """In the child: numpy (while the parent imports the service and makes its Brain), then
    the arm's answer. The child lives for one answer: no garbage collection (its passes
    would walk every object the parent had made as well)."""
    gc.disable()
    import numpy  # noqa: F401

    return _answer(settings, told)


class _NotWaiting:
    """The backoff of a process that has embedded nothing: never waiting."""

    def waiting(self) -> bool:
        return False

    def failed(self) -> None:
        pass


def _answer(settings: Settings, told: Callable[[], bytes]) -> bytes:
    """The vector arm's answer to the request the parent's Brain tells it (Brain.
    begin_query), with the models a Brain would make from `settings`, their light encoders
    loaded before it is told (for the tiers its own read says will answer), and reads of
    the index on connections of its own (nothing made, moved or written here). Its
    backoffs wait on nothing (it has embedded nothing); the parent takes the answer only
    on the tiers that answer there too."""
    from vault_brain.embed import make_embedder, make_strong_embedder
    from vault_brain.embed.cache import ModelCache
    from vault_brain.index.factory import open_reader
    from vault_brain.index.records import STRONG
    from vault_brain.search.semantic import VectorArm, query_loader

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
