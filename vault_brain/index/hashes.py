"""Hashes and timestamps the index keys things by (no heavy imports: the search path uses
them too)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def iso_utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
