"""Conversations as readable Markdown: a bold label per speaker, then what was said.

Labels are bold text, not headings: answers bring their own headings, and a heading per
message would cut the note into a section per message for search. Times are UTC.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from vault_brain.importers.records import ASSISTANT, USER, Conversation, Message
from vault_brain.vault.blocks import scan

TITLE_CHARS = 80
ASSISTANTS = {"claude": "Claude", "chatgpt": "ChatGPT"}
SOURCES = {"claude": "Claude", "chatgpt": "ChatGPT", "jsonl": "chat log"}
# Names chat apps give a conversation nobody named.
_PLACEHOLDERS = frozenset({"", "new chat", "new conversation", "untitled", "untitled chat"})
_FENCE = re.compile(r"[ \t>]*(`{3,}|~{3,})")
_MARKUP = re.compile(r"[*_`#>\[\]]+")


def note_title(conv: Conversation) -> str:
    """The conversation's name, else its first question cut at a word, else its date."""
    if conv.title.strip().lower() not in _PLACEHOLDERS:
        return _cut(" ".join(conv.title.split()), 200)
    for m in conv.messages:
        if m.role == USER:
            for line in m.text.splitlines():
                words = " ".join(_MARKUP.sub(" ", line).split())
                if words:
                    return _cut(words, TITLE_CHARS)
    day = (conv.created or "")[:10]
    return f"{SOURCES.get(conv.source, conv.source)} conversation {day or conv.id[:8]}".strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit)
    cut = text[:space] if space >= limit // 2 else text[: limit - 1]
    return cut.rstrip(" ,;:-–—") + "…"


def speaker(role: str, source: str) -> str:
    if role == USER:
        return "User"
    if role == ASSISTANT:
        return ASSISTANTS.get(source, "Assistant")
    return role


def render_messages(
    messages: Sequence[Message], source: str, text_of: Callable[[str], str] = lambda t: t
) -> str:
    """The messages as Markdown; `text_of` turns each message's text (adds wikilinks)."""
    parts = []
    for m in messages:
        when = f" · {m.created[:10]} {m.created[11:16]}" if m.created else ""
        parts.append(f"**{speaker(m.role, source)}**{when}\n\n{_closed(text_of(m.text))}\n")
    return "\n".join(parts)


def merged_heading(conv: Conversation, title: str, day: str) -> str:
    """The heading a conversation merged into another note goes under."""
    return f"## {day} · {SOURCES.get(conv.source, conv.source)}: {title}\n\n"


def _closed(text: str) -> str:
    """The text with a code fence it left open closed, so the next speaker's label is not
    swallowed into code."""
    blocks = scan(text)
    if not blocks.fenced or blocks.fenced[-1][1] < len(text):
        return text
    start = blocks.fenced[-1][0]
    opening = _FENCE.match(text, start)
    if opening is None:
        return text
    fence = opening.group(1)
    rest = text[text.find("\n", start) + 1 :] if "\n" in text[start:] else ""
    last = rest.rstrip().rsplit("\n", 1)[-1].strip(" \t>")
    if len(last) >= len(fence) and set(last) == {fence[0]}:
        return text  # closed on its very last line
    return f"{text}\n{fence}"
