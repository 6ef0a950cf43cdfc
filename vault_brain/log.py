"""Logs are events: one JSON object per line on stderr (stdout belongs to MCP stdio)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

# Re-entrant: a signal handler runs on the thread it interrupts, maybe inside _write.
_lock = threading.RLock()
_quiet = False
_human = False
# Warnings a person at a terminal should see; background noise (an endpoint that is down)
# is summed up by the command itself instead.
HUMAN_WARNINGS = frozenset(
    {
        "file_skipped",
        "file_unreadable",
        "folder_unreadable",
        "note_warning",
        "duplicate_id",
        "index_moved_aside",
        "index_schema_changed",
        "index_write_failed",
        "index_refresh_failed",
    }
)


def set_quiet(quiet: bool) -> None:
    """Silence info events (parse workers do); warnings still print."""
    global _quiet
    _quiet = quiet


def use_human_output() -> None:
    """For one-shot commands (index, search, get, status): no JSON lines, only the
    warnings a person needs, as short readable lines. `watch` and `serve` keep JSON."""
    global _quiet, _human
    _quiet = _human = True


def cut(text: str, limit: int = 80) -> str:
    """Queries and titles are cut before they reach a log line; note text never does."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event(name: str, level: str = "info", **fields: Any) -> None:
    if _quiet and level == "info":
        return
    if _human:
        if name in HUMAN_WARNINGS:
            detail = ", ".join(f"{k}={v}" for k, v in fields.items())
            _write(f"vault-brain: warning: {name.replace('_', ' ')}: {detail}")
        return
    record = {"ts": round(time.time(), 3), "level": level, "event": name, **fields}
    _write(json.dumps(record, ensure_ascii=False, default=str))


def _write(line: str) -> None:
    with _lock:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def warn(name: str, **fields: Any) -> None:
    event(name, level="warning", **fields)
