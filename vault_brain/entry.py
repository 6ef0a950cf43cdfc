"""The `vault-brain` command. A search with plain arguments runs without typer
(cli_search.py: typer's import and command tree are ~40 of a one-shot search's CPU-ms);
everything else, and any search this parser does not take, goes to the typer app (cli.py),
with its help, usage errors and suggestions."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["search"]:
        from vault_brain import cli_search

        params = cli_search.parse(args[1:])
        if params is not None:
            _run(cli_search.run, params)
            return
    from vault_brain.cli import main as typer_main

    typer_main()


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
