"""What every `vault-brain` command shares, without typer: the settings, the Brain, how an
error becomes a message and an exit code (0 ok, 1 runtime error, 2 usage or config).

A plain search runs on this and cli_search.py alone (entry.py): typer's import and its
command tree are ~40 of a one-shot search's CPU-ms."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from vault_brain.config import Settings, load_settings
from vault_brain.errors import ConfigError, InvalidInput, VaultBrainError


def fail(message: str, code: int) -> SystemExit:
    """Say what went wrong on stderr; the caller raises the exit (under typer too: click
    lets a SystemExit through)."""
    print(f"vault-brain: {message}", file=sys.stderr, flush=True)
    return SystemExit(code)


def settings_for(vault: str | None, config: str | None, **overrides: dict[str, Any]) -> Settings:
    try:
        return load_settings(vault=vault, config_file=config, overrides=overrides)
    except ConfigError as exc:
        raise fail(exc.message, 2) from None


@contextmanager
def open_brain(settings: Settings, *, one_shot: bool = True) -> Iterator[Any]:
    from vault_brain.service import Brain

    try:
        brain = Brain(settings, one_shot=one_shot)
    except VaultBrainError as exc:
        raise fail(exc.message, 2 if isinstance(exc, ConfigError) else 1) from None
    try:
        yield brain
    except ConfigError as exc:
        raise fail(exc.message, 2) from None
    except VaultBrainError as exc:
        raise fail(f"{exc.code}: {exc.message}", 1) from None
    finally:
        brain.close()


@contextmanager
def typed_values() -> Iterator[None]:
    """Brain refusing a value the user typed (a date, an empty query or reference, a version
    name) is a usage error, exit 2 as for a bad flag; what a file holds stays a runtime
    error (1)."""
    try:
        yield
    except InvalidInput as exc:
        raise fail(f"{exc.code}: {exc.message}", 2) from None
