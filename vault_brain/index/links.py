"""Which link targets reach a note: Obsidian's resolution rule, as the keys a store looks
links up by (every backend resolves links with the same keys)."""

from __future__ import annotations

from collections.abc import Iterable


def link_keys(path_key: str, aliases: Iterable[str]) -> set[str]:
    """Every link target that can resolve to a note at `path_key` (lowercased path without
    .md): the path and each of its suffixes after a '/', the file stem among them, and
    its aliases. Re-resolving these keys after a change keeps every link right."""
    parts = path_key.split("/")
    keys = {"/".join(parts[i:]) for i in range(len(parts))}
    keys |= {a.lower() for a in aliases}
    return keys
