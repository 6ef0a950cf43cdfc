"""Logs are events: one JSON object per line on stderr (stdout belongs to MCP stdio)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

_lock = threading.Lock()
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence info events (the CLI does this for human output); warnings still print."""
    global _quiet
    _quiet = quiet


def cut(text: str, limit: int = 80) -> str:
    """Queries and titles are cut before they reach a log line; note text never does."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event(name: str, level: str = "info", **fields: Any) -> None:
    if _quiet and level == "info":
        return
    record = {"ts": round(time.time(), 3), "level": level, "event": name, **fields}
    line = json.dumps(record, ensure_ascii=False, default=str)
    with _lock:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def warn(name: str, **fields: Any) -> None:
    event(name, level="warning", **fields)
