"""The vector arm of a one-shot CLI search, begun in a forked child before the Brain opens.

`cli_search.run` forks it as soon as it knows the settings and that no watcher or server
will answer, once the service's modules are imported (the child inherits them; importing
them again there cost more than the head start): the child imports numpy (the longest
step of its way, ~40-60 ms) and loads the light encoders of the tiers its own read of the
index says will answer, while this process makes the Brain and opens the index. The Brain
then tells it the search's request (Brain.begin_query, search/semantic.py begin_early) and
the child answers it on connections it opened itself (it shares no connection, file or
thread with this process), as a child the Brain forks itself would. Which answer is taken,
and when not, is search/semantic.py's; the child's pieces are made from the settings as
the Brain makes its own (service.py answer_forked).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from vault_brain.config import is_server_url
from vault_brain.embed.early import Early, can_fork

if TYPE_CHECKING:
    from collections.abc import Callable

    from vault_brain.config import Settings


# Tests: where the child lists the modules it imported once it has its answer (that a
# search with the C module built imports no numpy there: tests/test_early_query.py).
REPORT_MODULES = "VAULT_BRAIN_CHILD_MODULES"


def begin(settings: Settings, mode: str | None) -> Early | None:
    """The child, when a search in this mode may use one (a vector arm of in-process
    models, a second core); the caller hands it to Brain.begin_query, or discards it."""
    if (mode or settings.search.mode) == "fts" or settings.embed.provider != "local":
        return None
    if is_server_url(settings.index_location):  # a server's index: no reader for a child
        return None
    if not can_fork():
        return None
    from vault_brain import service  # noqa: F401 - imported next anyway; the child inherits it

    return Early(lambda told: _work(settings, told))


def _work(settings: Settings, told: Callable[[], bytes]) -> bytes:
    """In the child: numpy (while the parent makes its Brain), then the service's part.
    Where the C module is built (embed/e5_native.py), e5's query vector and the KNN need no
    numpy: the child then imports none (an instant tier's model, when one answers, imports
    it when it loads)."""
    from vault_brain.embed.e5_native import native

    if native() is None:
        import numpy  # noqa: F401

    from vault_brain.service import answer_forked

    answer = answer_forked(settings, told)
    report = os.environ.get(REPORT_MODULES)
    if report:  # the child's stderr is /dev/null (embed/early.py): its modules, to a file
        with open(report, "w", encoding="utf-8") as fh:
            fh.write("\n".join(sorted(sys.modules)))
    return answer
