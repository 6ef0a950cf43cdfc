"""Client paths → real paths inside the vault, or a refusal.

Invariant 3 lives here: nothing is written outside the vault. A client path is
vault-relative; after following symlinks it must still land inside the vault, outside
every dot-folder (the index, `.trash/`, `.obsidian/`, `.git/`), and inside the folders
the owner allowed writes to.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from vault_brain.errors import Forbidden, InvalidInput

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4096
MAX_NAME_CHARS = 120
# Leaves room for " 99.md" under the 255-byte file name limit of common file systems.
MAX_NAME_BYTES = 200

_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{i}" for i in range(1, 10)]
    + [f"LPT{i}" for i in range(1, 10)]
)
_DRIVE = re.compile(r"^[A-Za-z]:")
# Characters Obsidian refuses in file names; '/' and '\' read best as a dash ("2024/05").
_DASHED = str.maketrans({"/": "-", "\\": "-"})
_OBSIDIAN_FORBIDDEN = re.compile(r'[:*?"<>|#^\[\]]')
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc, all 65 of them


def resolve_note_path(root: Path, rel: str, *, allowed_folders: Sequence[str] = ()) -> Path:
    """The real path of a note file the client named, after every safety check.

    Names without `.md` get it appended. The path returned has no symlinks below `root`.
    """
    parts = _client_parts(rel)
    if not parts:
        raise InvalidInput("path is empty")
    if not parts[-1].lower().endswith(".md"):
        parts[-1] += ".md"
        _check_component(parts[-1])
    path = _resolve(Path(root), parts, allowed_folders)
    if not path.name.lower().endswith(".md"):
        # `Deploy.md -> keys/deploy.pem`: a note that is a link to some other kind of file.
        raise Forbidden("this note is a link to a file that is not Markdown")
    return path


def resolve_folder_path(
    root: Path, folder: str | None, *, allowed_folders: Sequence[str] = ()
) -> Path:
    """The real path of a folder the client named ("" or None: the vault root)."""
    parts = _client_parts(folder or "")
    return _resolve(Path(root), parts, allowed_folders)


def vault_relative(root: Path, path: Path) -> str:
    """POSIX path of `path` (as returned by the resolvers) relative to the vault."""
    return Path(path).relative_to(Path(root)).as_posix()


def normalize_ref(ref: str) -> str:
    """A note reference (path or name) as one spelling: NFC, '/' separators, no leading
    './' or '/'. macOS writes file names decomposed (NFD) while clients type them composed:
    compare references after this, never raw."""
    text = unicodedata.normalize("NFC", str(ref)).strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def name_key(name: str) -> str:
    """The key under which two names are the same note name on some disk: case- and
    normalisation-insensitive (APFS, NTFS, and Obsidian's own link resolution)."""
    return unicodedata.normalize("NFC", normalize_ref(name).casefold())


def safe_filename(title: str) -> str:
    """An Obsidian-compatible file name for a title: "Release checklist" → "Release checklist.md".

    Keeps the title readable in any script; only characters Obsidian or Windows refuse
    are replaced. Returns "Untitled.md" when nothing usable is left.
    """
    name = unicodedata.normalize("NFC", str(title)).translate(_DASHED)
    name = _OBSIDIAN_FORBIDDEN.sub(" ", name)
    name = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in name)
    name = " ".join(name.split())
    if name.lower().endswith(".md"):
        name = name[:-3]
    name = name.strip(" .")
    name = name[:MAX_NAME_CHARS]
    name = name.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", errors="ignore")
    name = name.strip(" .")
    if not name:
        name = "Untitled"
    first, dot, rest = name.partition(".")
    if first.upper() in _RESERVED:
        name = f"{first}_{dot}{rest}"
    return name + ".md"


def _client_parts(rel: str) -> list[str]:
    """Split a client path into checked components; refuse anything that climbs or hides."""
    if not isinstance(rel, str):
        raise InvalidInput("path must be a string")
    if "\x00" in rel:
        raise Forbidden("path contains a NUL character")
    if len(rel.encode("utf-8", errors="replace")) > MAX_PATH_BYTES:
        raise InvalidInput("path is too long")
    text = rel.strip().replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise Forbidden("absolute paths are refused; give a path relative to the vault")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    for part in parts:
        _check_component(part)
    return parts


def _check_component(part: str) -> None:
    if part == "..":
        raise Forbidden("'..' is refused in paths")
    if part.startswith("."):
        raise Forbidden(
            f"'{part}' is a hidden or reserved folder; vault-brain does not write there"
        )
    if _CONTROL.search(part):
        raise InvalidInput("path contains control characters")
    if part.partition(".")[0].rstrip(" ").upper() in _RESERVED:
        raise Forbidden(f"'{part}' is a reserved file name on Windows")
    try:
        size = len(part.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput("path is not valid Unicode") from exc
    if size > MAX_COMPONENT_BYTES:
        raise InvalidInput("a path component is longer than 255 bytes")


def _resolve(root: Path, parts: list[str], allowed_folders: Sequence[str]) -> Path:
    root_real = Path(os.path.realpath(root))
    real = Path(os.path.realpath(root_real.joinpath(*parts)))
    real_rel = _inside(root_real, real)
    if real_rel is None:
        raise Forbidden("path leads outside the vault")
    # A symlink inside the vault may point into a dot-folder: check where it really lands.
    for part in real_rel:
        _check_component(part)
    if allowed_folders:
        _check_allowed(root_real, parts, real, allowed_folders)
    return Path(root).joinpath(*real_rel)


def _check_allowed(root_real: Path, parts: list[str], real: Path, allowed: Sequence[str]) -> None:
    for folder in allowed:
        folder_parts = [p for p in str(folder).replace("\\", "/").split("/") if p not in ("", ".")]
        if not folder_parts:
            return
        if parts[: len(folder_parts)] != folder_parts:
            continue
        folder_real = Path(os.path.realpath(root_real.joinpath(*folder_parts)))
        if _inside(folder_real, real) is not None:
            return
    raise Forbidden("writes are limited to the configured folders: " + ", ".join(allowed))


def _inside(base: Path, path: Path) -> tuple[str, ...] | None:
    try:
        return path.relative_to(base).parts
    except ValueError:
        return None


def claim_free_name(names: Iterable[Path]) -> Path | None:
    """The first of `names` that did not exist, now created empty (O_EXCL: two writers,
    in any processes, never claim the same one); None when every name is taken."""
    for path in names:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    return None
