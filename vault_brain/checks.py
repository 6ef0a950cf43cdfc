"""Input checks every door shares (MCP tools, CLI, Brain): the same limits, the same tag
cleaning, the same refusal of credentials, so a value is judged the same way everywhere."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from vault_brain.contract import TAG_MAX, TAGS_MAX
from vault_brain.errors import InvalidInput


def clean_tags(tags: Sequence[str] | str | None) -> list[str] | None:
    """Tags as Obsidian stores them: no '#', no surrounding space, no empties, no repeats.
    A string "a, b" is a list (models often send one). None stays None (no change)."""
    if tags is None:
        return None
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput("tags must be strings")
        clean = tag.strip().lstrip("#").strip()
        if not clean:
            continue
        if len(clean) > TAG_MAX or any(ch.isspace() for ch in clean):
            raise InvalidInput(f"tag {clean[:TAG_MAX]!r} must be 1-{TAG_MAX} characters, no spaces")
        if clean not in out:
            out.append(clean)
    if len(out) > TAGS_MAX:
        raise InvalidInput(f"at most {TAGS_MAX} tags")
    return out


def check_text(field: str, value: str | None, cap: int, *, reject_secrets: bool) -> None:
    """Type and length, and no credentials in what would be written into the vault."""
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text")
    if len(value) > cap:
        raise InvalidInput(f"{field} is longer than {cap} characters")
    if reject_secrets:
        from vault_brain.text.secrets import find_secret  # its patterns: only for writes

        kind = find_secret(value)
        if kind:
            raise InvalidInput(
                f"{field} looks like it holds a credential ({kind}); notes must not store secrets"
            )


_RELATIVE = re.compile(r"^\s*(\d{1,5})\s*([hdwmy])\s*$", re.IGNORECASE)
_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}


def parse_when(
    field: str, value: str | None, *, end_of_day: bool = False, now: datetime | None = None
) -> str | None:
    """An ISO date or time ("2026-11-30", "2026-11-30T14:00:00Z") or a span back from now
    ("24h", "7d", "2w", "3m", "1y") as the ISO 8601 UTC text the index sorts by. A bare
    date as an upper bound means the end of that day."""
    if value is None or not str(value).strip():
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text such as 2026-11-30 or 7d")
    now = now or datetime.now(UTC)
    relative = _RELATIVE.match(value)
    if relative:
        seconds = int(relative.group(1)) * _UNITS[relative.group(2).lower()]
        moment = now - timedelta(seconds=seconds)
    else:
        text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidInput(
                f"{field}: {value[:40]!r} is not a date (2026-11-30, 2026-11-30T14:00Z) "
                "or a span back from now (24h, 7d, 2w, 3m, 1y)"
            ) from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        if end_of_day and len(value.strip()) == 10:
            moment += timedelta(days=1, seconds=-1)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
