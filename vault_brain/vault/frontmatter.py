"""The one frontmatter reader: where the block is, how its YAML loads, which keys are ours.

Reading (note.py) and editing (render.py) both use it, so whatever block the reader sees
is the block the updater edits: with any line ending (LF, CRLF, and old Macs' CR alone),
and with dates that do not exist (`2024-02-30`) kept as text instead of failing.

Obsidian's rule: the first line is `---` (trailing spaces allowed) and the block ends at
the next line that is `---`; without a closing fence the file has no frontmatter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from vault_brain.native import load

# Keys vault-brain writes; `tag` is read as `tags` (Obsidian accepts both).
OWNED_KEYS = ("id", "title", "summary", "updated", "tags")
_ALIASES = {"tag": "tags"}
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_FENCE = re.compile(r"---[ \t]*(?:\r\n|\r|\n|\Z)")
_FIRST_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Split:
    opening: str  # the opening fence line, with its line break
    block: str  # the YAML text as written, line breaks included
    closing: str  # the closing fence line, with its line break ("" at the end of the file)
    body: str  # everything after the closing fence, as written
    closed: bool  # False: an opening fence that never closes (no frontmatter, warn)


def split_frontmatter(text: str) -> Split | None:
    """The frontmatter of `text` (BOM already removed), or None when it has none.

    An opening fence without a closing one gives Split(closed=False) with the whole text
    as body: the reader warns, the editor treats it as text.
    """
    first = _FENCE.match(text)
    if first is None:
        return None
    if first.end() == len(text) or text[first.end() - 1] not in "\r\n":
        return Split("", "", "", text, closed=False)
    pos = first.end()
    fence = _closing(text, pos) if text.find("\r", pos) < 0 else _closing_walk(text, pos)
    if fence is None:
        return Split("", "", "", text, closed=False)
    return Split(
        text[: first.end()],
        text[first.end() : fence.start()],
        fence.group(),
        text[fence.end() :],
        closed=True,
    )


def _closing(text: str, pos: int) -> re.Match[str] | None:
    """_closing_walk's answer for a text without "\r" after pos: a line starts at pos and
    after each "\n", and a fence line starts with "---", so only those are tried."""
    while True:
        fence = _FENCE.match(text, pos)
        if fence is not None:
            return fence
        pos = text.find("\n---", pos) + 1
        if pos == 0:
            return None


def _closing_walk(text: str, pos: int) -> re.Match[str] | None:
    """The closing fence: the first line from pos on that is `---` (any line ending)."""
    while pos < len(text):
        fence = _FENCE.match(text, pos)
        if fence is not None:
            return fence
        pos = _LINE.match(text, pos).end()  # type: ignore[union-attr]
    return None


def line_ending(text: str) -> str:
    """The file's line break, as its first line has it; "\\n" for a one-line file."""
    m = _FIRST_BREAK.search(text)
    return m.group() if m else "\n"


def canonical_key(key: object) -> str | None:
    """Our key that `key` spells ("Tags", "TAG", " summary" → "tags", "summary"), or None."""
    if not isinstance(key, str):
        return None
    name = key.strip().lower()
    name = _ALIASES.get(name, name)
    return name if name in OWNED_KEYS else None


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """A date YAML cannot build (2026-02-30) stays text, so one typo cannot sink the rest."""
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return loader.construct_scalar(node)


class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml's safe loader, except that impossible dates load as their text."""


Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)

# Values that aliases may add to a block. `*name` repeats the node `&name` marks, and
# nested aliases multiply: ten per level over ten levels is 10**10 values from 1 KB, and a
# chain of merge keys (`<<: *previous`) grows with the square of its length (3,000 links,
# 4.5 million values). Loading shares the repeats, but every comparison or copy of the
# value walks them all: an update of such a note never returned. Real frontmatter uses an
# alias or two, if any; a big block without aliases costs what its text costs.
ALIAS_VALUES_MAX = 10_000


class TooManyValues(ValueError):
    """The block's aliases expand it past ALIAS_VALUES_MAX values (or into a loop)."""


# What loading a block can raise besides YAMLError: odd values (a huge int, an unhashable
# key), deep nesting, and aliases that multiply.
LOAD_ERRORS = (yaml.YAMLError, ValueError, TypeError, RecursionError, OverflowError)


# Simple blocks (`key: value` lines, quoted strings, one-line lists, `- item` lists: the
# subset vault_brain/native/_frontmatter.c describes) without PyYAML's parser, each plain
# scalar resolved and built by PyYAML's own resolver and constructors (_plain); anything
# else, and everything without the C or with VAULT_BRAIN_NATIVE=0, goes to PyYAML.
_native = load("_frontmatter")
_STR = "tag:yaml.org,2002:str"
_BUILT = ("null", "bool", "int", "float", "timestamp")  # the tags _plain builds
_BUILDERS = {
    f"tag:yaml.org,2002:{t}": Loader.yaml_constructors[f"tag:yaml.org,2002:{t}"] for t in _BUILT
}
_FIRSTS = "".join(k for k in Loader.yaml_implicit_resolvers if k)
if None in Loader.yaml_implicit_resolvers or Loader.yaml_path_resolvers:
    _native = None  # a resolver for any first character: none of this holds
_resolver: Any = None
_plains: dict[str, Any] = {}  # plain scalar -> its value (immutable scalars; bounded in C)


def _plain(text: str) -> Any:
    """A plain scalar's value as PyYAML builds it, or NotImplemented for a tag _BUILT lacks."""
    global _resolver
    if _resolver is None:
        _resolver = Loader("")
    tag = _resolver.resolve(yaml.ScalarNode, text, (True, False))
    if tag == _STR:
        return text
    build = _BUILDERS.get(tag)
    if build is None:
        return NotImplemented
    return build(_resolver, yaml.ScalarNode(tag, text))


def load_block(block: str) -> Any:
    """The block's YAML value. Raises one of LOAD_ERRORS when it cannot be loaded, and
    TooManyValues (before building anything) when its aliases multiply it."""
    if _native is not None:
        data = _native.load(block, _plain, _plains, _FIRSTS)
        if data is not None:
            return data
    return load_block_py(block)


def load_block_py(block: str) -> Any:
    """load_block() with PyYAML alone: the fallback, and the reference of the C one."""
    loader = Loader(block)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in block:  # an alias is written `*name`: a block without one cannot expand
            check_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def check_expansion(root: yaml.Node, limit: int = ALIAS_VALUES_MAX) -> None:
    """Raise TooManyValues when the node graph, with every alias expanded, holds more than
    `limit` values beyond its own nodes. Counted on the graph, each node once (its expanded
    size remembered), so the count costs what the text costs, whatever it would expand to."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            active.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            sizes[key] = size
            if size - len(sizes) > limit:
                raise TooManyValues(_too_many(limit))
            continue
        if key in sizes:
            continue
        if key in active:
            raise TooManyValues("its aliases refer to themselves, without end")
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _too_many(limit: int) -> str:
    return f"its aliases expand it by more than {limit:,} values"
