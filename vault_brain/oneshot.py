"""The vector arm of a one-shot CLI search, begun in a forked child before the Brain opens.

`cli_search.run` forks it as soon as it knows the settings and that no watcher or server
will answer: the child imports numpy and the arm's pieces (the longest part of its way:
~40 and ~15 ms) and loads the light encoders of the tiers its own read of the index says
will answer, while this process imports the service, opens the index and the Brain. The
Brain then tells it the search's request (Brain.begin_query, search/semantic.py
begin_early) and the child answers it on its own connection (opened after the fork: it
shares no connection, file or thread with this process), as the forked child that the
Brain begins itself would. The rest (which answer is taken, and when not) is
search/semantic.py's.

The child's pieces are made from the settings as the Brain makes its own (service.py
answer_forked).
"""

from __future__ import annotations

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
    """In the child: numpy first (the longest import: the parent imports its own modules
    meanwhile), then the service's part (service.py answer_forked)."""
    import numpy  # noqa: F401

    from vault_brain.service import answer_forked

    return answer_forked(settings, told)
