"""The `vault-brain` command. A search with plain arguments runs without typer
(cli_search.py: typer's import and command tree are ~40 of a one-shot search's CPU-ms);
everything else, and any search this parser does not take, goes to the typer app (cli.py),
with its help, usage errors and suggestions.

`command` is the executable (and `python -m vault_brain`): after a plain search that
answered, the process ends at once instead of tearing the interpreter down."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def main() -> None:
    _dispatch()


def command() -> None:
    """main(), then, once a plain search has answered (its output written and flushed, its
    index closed, the resident it leaves spawned), the process ends at once: tearing the
    interpreter down (every module's objects, numpy's and onnxruntime's state, the query
    model's session and its mapped weights) cost a one-shot search ~10 CPU-ms in full text
    and ~30 with e5 for nothing (docs/benchmarks.md, "The first search, round 7").
    Anything else (another command, a usage error, an error) exits as Python does. A plain
    search also runs without the cyclic garbage collector: a process that ends in a moment
    has no cycles worth finding, and its passes over the objects of every import (numpy's,
    onnxruntime's) cost it ~3 CPU-ms in full text and ~6 with e5."""
    if _dispatch(one_shot=True):
        _end_now()


def _dispatch(*, one_shot: bool = False) -> bool:
    """Run the command; True when it was a plain search that answered."""
    args = sys.argv[1:]
    if args[:1] == ["search"]:
        from vault_brain import cli_search

        params = cli_search.parse(args[1:])
        if params is not None:
            if one_shot:
                import gc

                gc.disable()
            _run(cli_search.run, params)
            return True
    from vault_brain.cli import main as typer_main

    typer_main()
    return False


def _end_now() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # a reader gone (`… | head -1`): as _run, not an error
    os._exit(0)


def _run(command: Callable[..., None], params: dict[str, Any]) -> None:
    """As typer's main would: Ctrl-C exits 130, a reader that stopped early (`… | head -1`)
    is not an error."""
    try:
        command(**params)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # Python would complain again flushing stdout at exit: point it at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
