"""Reading note files: only what lies inside the vault, and only Markdown.

A vault may carry symlinks (a cloned repository can: `Setup notes.md ->
../../outside/home/.ssh/id_rsa`). The scanner and every read follow a symlink only when
its target resolves inside the vault, outside its dot-folders, or inside a folder the
owner trusts (`vault.follow_outside`), and never to a file that is not Markdown. Readers
call `read_note_bytes` instead of opening `root / rel` themselves.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from vault_brain.errors import Forbidden, InvalidInput
from vault_brain.native import load

# The read of a note whose path holds no symlink, in C (vault_brain/native/_readnote.c): no
# realpath (an lstat and Python work per component). It answers None for anything else
# (a symlink, an error, not Markdown, not a regular file): the Python below decides.
_native = load("_readnote")

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # the last step was resolved already: no swap-in link
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO named x.md must not hang the indexer
    | getattr(os, "O_BINARY", 0)
)


def trusted_roots(
    root: Path, follow_outside: Iterable[str | os.PathLike[str]] = ()
) -> tuple[str, ...]:
    """The real paths of the folders outside the vault that symlinks may lead into.
    `~` is expanded; a relative entry is relative to the vault."""
    out = []
    for folder in follow_outside:
        path = Path(os.path.expanduser(os.fspath(folder)))
        if not path.is_absolute():
            path = Path(root) / path
        out.append(os.path.realpath(path))
    return tuple(out)


def link_refusal(
    real: str, vault_real: str, trusted: tuple[str, ...], *, is_dir: bool
) -> str | None:
    """Why a symlink whose target is `real` (a realpath) must not be followed, or None."""
    for base in (vault_real, *trusted):
        rel = _relative(base, real)
        if rel is not None:
            if rel and any(p.startswith(".") for p in _rel_parts(rel)):
                return "symlink leads into a hidden folder"
            if not is_dir and not real.lower().endswith(".md"):
                return "symlink leads to a file that is not Markdown"
            return None
    return "symlink leads outside the vault"


def _relative(base: str, path: str) -> str | None:
    """`path` relative to `base` ("" for base itself), or None when it is outside. Both are
    real paths (normalised): on POSIX a prefix test, as commonpath + relpath answer it."""
    if os.sep == "/" and os.altsep is None and not base.startswith("//"):
        if path == base:
            return ""
        prefix = base if base.endswith("/") else base + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None
    if not _within(base, path):
        return None
    rel = os.path.relpath(path, base)
    return "" if rel == "." else rel


def _rel_parts(rel: str) -> tuple[str, ...] | list[str]:
    return rel.split("/") if os.sep == "/" and os.altsep is None else Path(rel).parts


def read_note_bytes(root: Path, rel: str, trusted: Iterable[str | os.PathLike[str]] = ()) -> bytes:
    """The bytes of the note at vault-relative `rel`.

    Raises Forbidden when the path (after every symlink) leaves the vault and the trusted
    folders, lands in a dot-folder, or is not a Markdown file; InvalidInput for a name
    that is not UTF-8 or a path that climbs; FileNotFoundError when it is gone; OSError
    for other read errors.
    """
    return NoteReader(root, trusted).read(rel)


class NoteReader:
    """read_note_bytes for many notes of one vault: the vault's and the trusted folders'
    real paths are resolved once, not for every note (a parse worker reads thousands; each
    resolution is an lstat per component). Every note's own path is still resolved at its
    read and checked against them."""

    def __init__(self, root: Path, trusted: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.vault_real = os.path.realpath(root)
        self.trusted = trusted_roots(root, trusted)

    def read(self, rel: str) -> bytes:
        """As read_note_bytes."""
        parts = _parts(rel)
        if _native is not None:
            raw = _native.read_plain(self.vault_real, parts)
            if raw is not None:
                return raw
        return self.read_py(parts)

    def read_py(self, parts: list[str]) -> bytes:
        """read() in Python, of a path _parts checked: the fallback, and the reference."""
        real = os.path.realpath(os.path.join(self.vault_real, *parts))
        why = link_refusal(real, self.vault_real, self.trusted, is_dir=False)
        if why is not None:
            raise Forbidden(f"{why}; not read")
        fd = os.open(real, _FLAGS)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise Forbidden("not a regular file; not read")
            chunks = []
            while chunk := os.read(fd, max(info.st_size + 1, 65536)):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


def _parts(rel: str) -> list[str]:
    if not isinstance(rel, str) or "\x00" in rel:
        raise InvalidInput("not a note path")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("the file name is not valid UTF-8") from exc
    text = rel.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise Forbidden("absolute paths are refused")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Forbidden("'..' is refused in paths")
    if any(p.startswith(".") for p in parts):
        raise Forbidden("notes in hidden folders are not read")
    return parts


def _within(base: str, path: str) -> bool:
    try:
        return os.path.commonpath([base, path]) == base
    except ValueError:  # different drives (Windows)
        return False
