"""Mentions of the vault's notes in imported text become [[wikilinks]], offline.

A mention is a note's title or alias as whole words, in any case. The longest name wins
where several start at the same word ("Postgres Upgrade" over "Postgres"), the leftmost
where they overlap, and each note is linked once, at its first mention. Code (fences and
spans), existing links and web addresses are never touched.

Matching grows a run of words only while it is the start of some name, with a set
look-up per word: its cost grows with the text, not with the number of notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from vault_brain.vault.blocks import mask_code

MAX_WORDS = 12
MIN_CHARS = 3
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
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
        self.names: dict[str, str] = {}  # a name's key -> its target
        self.prefixes: set[str] = set()  # the keys of names' first 1, 2, ... words
        for t in targets:
            name = t.name.strip()
            if len(name) < MIN_CHARS or name.isdigit() or _NOT_LINKABLE.search(name):
                continue
            words = list(_WORD.finditer(name))
            # Only names that start and end with a letter or digit can be whole words.
            if (
                not words
                or len(words) > MAX_WORDS
                or not (name[0].isalnum() and name[-1].isalnum())
            ):
                continue
            self.names.setdefault(key(name), t.target)
            self.prefixes.update(key(name[: w.end()]) for w in words)

    def link(self, text: str, done: set[str]) -> str:
        """`text` with the first mention of each note whose target is not in `done` (any
        case) made a link; the targets linked are added to `done`."""
        if not self.names or not text:
            return text
        masked = _LINKISH.sub(lambda m: " " * len(m.group()), mask_code(text))
        spans = [(m.start(), m.end()) for m in _WORD.finditer(masked)]
        words = [text[a:b].casefold() for a, b in spans]
        out: list[str] = []
        pos = i = 0
        while i < len(spans):
            found = None
            # Grow a run of words while it is the start of some name; keep the longest name.
            run = words[i]
            j = i
            while run in self.prefixes:
                target = self.names.get(run)
                if target is not None and target.casefold() not in done:
                    found = (j, target)
                if j + 1 == len(spans):
                    break
                gap = text[spans[j][1] : spans[j + 1][0]]
                if "\n" in gap:
                    break  # a link cannot span lines
                gap = _SPACE.sub(" ", gap.casefold())
                j += 1
                run = f"{run}{gap}{words[j]}"
            if found is None:
                i += 1
                continue
            j, target = found
            start, end = spans[i][0], spans[j][1]
            span = text[start:end]
            out += [text[pos:start], f"[[{target}]]" if span == target else f"[[{target}|{span}]]"]
            pos = end
            done.add(target.casefold())
            i = j + 1
        return "".join(out) + text[pos:]
