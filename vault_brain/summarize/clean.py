"""Turning a chat model's reply into a summary fit for a frontmatter line.

Models wrap answers in reasoning blocks, labels, fences and quotes, and run long. What is
left after cleaning is one line of plain text no longer than the configured cap; an empty
result means the reply held no summary (the caller treats that as a failed call).
"""

from __future__ import annotations

import re

# Reasoning blocks that models (DeepSeek-R1, Qwen3, ...) and chat templates emit.
_TAGS = r"think|thinking|thought|thoughts|reasoning|reflection|analysis"
_OPEN = re.compile(rf"<({_TAGS})\b[^<>]*>", re.IGNORECASE)
_CLOSE = re.compile(rf"</({_TAGS})\s*>", re.IGNORECASE)
# "Reasoning: ..." preambles, and the label that ends them.
# Every run below is unambiguous (\s is part of \W; a colon ends the run before it), so a
# reply of 100k spaces or newlines is read once, not once per character.
_PREAMBLE = re.compile(
    r"^\W*+(reasoning|thinking|thoughts|thought process|analysis|chain of thought)[^\w:：]*[:：]",
    re.IGNORECASE,
)
_ANSWER_LABEL = re.compile(
    r"^[^\w\n]*+(final answer|answer|final summary|summary|tl;?dr)[^\w:：]*[:：]\W*",
    re.IGNORECASE | re.MULTILINE,
)
# "Here is a one-sentence summary of the note:" and bare "Summary:" at the start.
_LEAD_IN = re.compile(
    r"^\W*(?:(?:sure|okay|ok)[,.!]?\s*)?(?:here(?:'s| is) (?:a|the|your) [^:\n]{0,60}"
    r"summary[^:\n]{0,40}|summary|tl;?dr)\s*(?:\*+\s*)?[:：]\s*(?:\*+\s*)?",
    re.IGNORECASE,
)
_FENCE_LINE = re.compile(r"^[ \t]*+(```|~~~)[\w-]*+[ \t]*+$", re.MULTILINE)
_QUOTE_MARK = re.compile(r"^[ \t]*+>[ \t]?", re.MULTILINE)
_QUOTES = [('"', '"'), ("'", "'"), ("“", "”"), ("„", "“"), ("«", "»"), ("「", "」"), ("`", "`")]
_EMPHASIS = ("***", "**", "__", "*", "_")
# A full stop and any closing quotes: followed by a space (Latin scripts) or not (CJK).
_SENTENCE_END = re.compile(r"[.!?…][\"'”»)\]]*(?=\s|$)|[。！？][」』）”]*")
ELLIPSIS = "…"


def strip_reasoning(text: str) -> str:
    """The reply without reasoning: tagged blocks, an unclosed block, a labelled preamble."""
    text = _drop_blocks(text)
    closes = list(_CLOSE.finditer(text))
    if closes:
        # A closing tag without its opening (the template opened it): the answer follows it.
        text = text[closes[-1].end() :]
    opened = _OPEN.search(text)
    if opened:
        # An unclosed block runs to the end of the reply (the model stopped mid-thought).
        text = text[: opened.start()]
    if _PREAMBLE.match(text.lstrip()):
        labels = list(_ANSWER_LABEL.finditer(text))
        if labels:
            text = text[labels[-1].end() :]
        else:
            parts = re.split(r"\n\s*\n", text.strip(), maxsplit=1)
            text = parts[1] if len(parts) > 1 else ""
    return text


def _drop_blocks(text: str) -> str:
    """Tagged blocks out, each opening tag to the nearest closing tag of its name. A tag
    with no closing tag left is never looked for again (a regex did, once per opener)."""
    parts = []
    pos = 0
    dead: set[str] = set()
    search_from = 0
    while (opened := _OPEN.search(text, search_from)) is not None:
        name = opened.group(1).lower()
        if name in dead:
            search_from = opened.end()
            continue
        closer = re.compile(rf"</{name}\s*>", re.IGNORECASE).search(text, opened.end())
        if closer is None:
            dead.add(name)
            search_from = opened.end()
            continue
        parts.append(text[pos : opened.start()])
        pos = search_from = closer.end()
    return "".join(parts) + text[pos:]


def _unwrap(text: str) -> str:
    """Drop quotes or emphasis wrapped around the whole text, repeatedly."""
    changed = True
    while changed and text:
        changed = False
        for left, right in _QUOTES:
            if len(text) > 1 and text.startswith(left) and text.endswith(right):
                inner = text[len(left) : -len(right)]
                if left not in inner and right not in inner:
                    text, changed = inner.strip(), True
        for mark in _EMPHASIS:
            if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
                text, changed = text[len(mark) : -len(mark)].strip(), True
                break
    return text


def cap_text(text: str, max_chars: int) -> str:
    """At most max_chars: cut after the last whole sentence that fits, else at a word
    boundary with an ellipsis (else mid-word, for scripts without spaces)."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return text[:max_chars]
    window = text[: max_chars + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() <= max_chars]
    if ends and ends[-1] >= max_chars * 0.4:
        return text[: ends[-1]].rstrip()
    room = text[: max_chars - len(ELLIPSIS) + 1]
    cut = room.rstrip().rfind(" ")
    if cut >= max_chars * 0.4:
        head = room[:cut]
    else:
        head = text[: max_chars - len(ELLIPSIS)]
    return head.rstrip(" ,;:-–—") + ELLIPSIS


def clean_summary(reply: str, max_chars: int) -> str:
    """The summary in a model's reply, as one line of at most max_chars ('' when none)."""
    text = strip_reasoning(reply or "")
    text = _FENCE_LINE.sub("", text)
    text = _QUOTE_MARK.sub("", text)
    text = text.strip()
    text = _LEAD_IN.sub("", text, count=1)
    text = " ".join(text.split())
    text = _unwrap(text)
    return cap_text(text, max_chars)
