"""Summaries of notes: a chat model's when one is configured (llm.py), else the extractive
lead that parsing already computes. Either way the frontmatter `summary` a person or a
model wrote wins; this package only fills the gap, in the background."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vault_brain.config import SummarySettings
    from vault_brain.summarize.llm import Summarizer


def make_summarizer(settings: SummarySettings) -> Summarizer | None:
    """The configured summarizer, or None when summary.provider is "none" (imported lazily,
    so opening a Brain without one never loads httpx)."""
    if settings.provider == "none":
        return None
    from vault_brain.summarize.llm import make_summarizer as make

    return make(settings)
