"""How SQLite answers the full-text question's parts (index/ranking.py puts them
together): the analysed query turned into FTS5 MATCH text, here and only here: every
form quoted, so no FTS5 syntax ever comes from user text.
"""

from __future__ import annotations

from collections.abc import Sequence


def match_groups(groups: Sequence[tuple[str, ...]]) -> str | None:
    """Groups of forms as an FTS5 MATCH expression: the forms of a group ORed in
    parentheses, groups ORed (bm25 then ranks by how many groups a text has); every form
    quoted; None for no groups."""
    if not groups:
        return None
    parts = []
    for forms in groups:
        quoted = [_quote(form) for form in forms]
        parts.append(quoted[0] if len(quoted) == 1 else "(" + " OR ".join(quoted) + ")")
    return " OR ".join(parts)


def _quote(form: str) -> str:
    """A form as an FTS5 string; a trailing "*" (from query_grams) makes it a prefix."""
    star = "*" if form.endswith("*") else ""
    return '"' + form.rstrip("*").replace('"', '""') + '"' + star
