"""Mentions of the vault's notes in imported text become [[wikilinks]], offline.

A mention is a note's title or alias as whole words, in any case. The longest name wins
where several start at the same word ("Postgres Upgrade" over "Postgres"), the leftmost
where they overlap, and each note is linked once, at its first mention. Code (fences and
spans), existing links and web addresses are never touched.

Matching is a dictionary look-up per run of up to MAX_WORDS words, not a regex of every
name: its cost grows with the text, not with the number of notes in the vault.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from vault_brain.vault.blocks import mask_code

MAX_WORDS = 12
MIN_CHARS = 3
_WORD = re.compile(r"\w+")
_NOT_LINKABLE = re.compile(r"[\[\]|#^\n]")
# Already a link, or an address: [[...]], [text](target), <https://...>, bare URLs.
_LINKISH = re.compile(
    r"!?\[\[[^\[\]\n]*\]\]|!?\[[^\[\]\n]*\]\([^()\n]*\)|<[a-z][a-z0-9+.-]*:[^<>\s]*>"
    r"|\b[a-z][a-z0-9+.-]*://\S+|\bwww\.\S+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LinkTarget:
    name: str  # a title or an alias, as the vault spells it
    target: str  # what goes inside [[ ]]: the note's file name, or its path when shared


def key(text: str) -> str:
    return " ".join(text.casefold().split())


class Linker:
    def __init__(self, targets: Iterable[LinkTarget]) -> None:
        self.names: dict[str, str] = {}
        self.max_words = 1
        for t in targets:
            name = t.name.strip()
            if len(name) < MIN_CHARS or name.isdigit() or _NOT_LINKABLE.search(name):
                continue
            words = _WORD.findall(name)
            # Only names that start and end with a letter or digit can be whole words.
            if not words or not (name[0].isalnum() and name[-1].isalnum()):
                continue
            self.names.setdefault(key(name), t.target)
            self.max_words = max(self.max_words, min(len(words), MAX_WORDS))

    def link(self, text: str, done: set[str]) -> str:
        """`text` with the first mention of each note whose target is not in `done` (any
        case) made a link; the targets linked are added to `done`."""
        if not self.names or not text:
            return text
        masked = _LINKISH.sub(lambda m: " " * len(m.group()), mask_code(text))
        words = [(m.start(), m.end()) for m in _WORD.finditer(masked)]
        out: list[str] = []
        pos = 0
        i = 0
        while i < len(words):
            found = None
            for j in range(min(len(words), i + self.max_words) - 1, i - 1, -1):
                span = text[words[i][0] : words[j][1]]
                target = self.names.get(key(span))
                if target is not None and target.casefold() not in done:
                    found = (j, span, target)
                    break
            if found is None:
                i += 1
                continue
            j, span, target = found
            start, end = words[i][0], words[j][1]
            out += [text[pos:start], f"[[{target}]]" if span == target else f"[[{target}|{span}]]"]
            pos = end
            done.add(target.casefold())
            i = j + 1
        return "".join(out) + text[pos:]
