"""The public contract's constants, defined once: search modes, fusions and the
limits every edge (MCP tools, CLI, config, Brain) enforces the same way."""

from __future__ import annotations

MODES = ("hybrid", "fts", "vector")
FUSIONS = ("adaptive", "convex", "rrf")

TITLE_MAX = 300  # characters
SUMMARY_MAX = 1_000
TAGS_MAX = 32  # tags per note
TAG_MAX = 64  # characters per tag
QUERY_MAX = 2_000
REF_MAX = 1_024  # ids and vault-relative paths
CURSOR_MAX = 512
VERSION_MAX = 64
SNIPPET_MAX = 240
CONFLICT_CONTENT_MAX = 8_000  # a CONFLICT reply carries the current content up to this
SEARCH_LIMIT_MAX = 50
LIST_LIMIT_MAX = 100
