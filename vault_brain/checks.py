"""Input checks every door shares (MCP tools, CLI, Brain): the same limits, the same tag
cleaning, the same refusal of credentials, so a value is judged the same way everywhere."""

from __future__ import annotations

from collections.abc import Sequence

from vault_brain.contract import TAG_MAX, TAGS_MAX
from vault_brain.errors import InvalidInput
from vault_brain.vault.secrets import find_secret


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
        kind = find_secret(value)
        if kind:
            raise InvalidInput(
                f"{field} looks like it holds a credential ({kind}); notes must not store secrets"
            )
