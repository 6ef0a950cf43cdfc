"""The stat pass: which Markdown files the vault holds, with mtime and size, fast.

Sync compares this against the index to find candidates; content hashes decide. A
folder that cannot be listed is reported, not treated as empty, so sync keeps the notes
it already knows there instead of deleting them.
"""

from __future__ import annotations

import heapq
import operator
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from vault_brain.errors import NotFound, Unavailable
from vault_brain.vault.reading import link_refusal, trusted_roots

# Folders are listed through a descriptor where the OS can (POSIX; not Windows): _open_folder.
BY_DESCRIPTOR = os.scandir in os.supports_fd and hasattr(os, "O_DIRECTORY")
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
# The longest folder path listed so: PATH_MAX's smallest (1,024 bytes, macOS), less a name
# (NAME_MAX, 255) and its '/'; a file below one is always openable by its path.
DESCRIPTOR_PATH_MAX = 1024 - 256


class FileStat(NamedTuple):
    """One Markdown file as the stat pass sees it. A NamedTuple, not a frozen dataclass: a
    frozen dataclass costs 3.4 µs to make against 0.2 µs. The pass itself makes plain tuples
    (0.03 µs; ScanResult.rows); these are made from them only where a caller asks."""

    path: str  # vault-relative POSIX
    mtime_ns: int
    size: int


@dataclass
class ScanResult:
    # (path, mtime_ns, size) of every Markdown file, sorted by path: what a pass that finds
    # the vault as stored compares with the index's own list, with no object made per file.
    rows: list[tuple[str, int, int]] = field(default_factory=list)
    unreadable_dirs: list[str] = field(default_factory=list)  # folders that could not be listed
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)

    @cached_property
    def files(self) -> list[FileStat]:
        """The rows as FileStat records (made on first use)."""
        return list(map(FileStat._make, self.rows))


def is_markdown(name: str) -> bool:
    return name.lower().endswith(".md")


def is_ignored(rel_path: str, ignore: Sequence[str] = ()) -> bool:
    """Whether the scanner leaves rel_path out: dot-files/folders anywhere, or a glob.

    A trailing '/' on rel_path says it is a folder. Globs match the whole path, each
    folder prefix of it and (without a '/') each single name; a glob ending in '/'
    matches folders only. The watcher uses this on single event paths.
    """
    is_dir = rel_path.endswith("/")
    parts = [p for p in rel_path.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p.startswith(".") for p in parts):
        return True
    return _glob_ignored(parts, is_dir, ignore)


def _glob_ignored(parts: list[str], is_dir: bool, ignore: Sequence[str]) -> bool:
    for pattern in ignore:
        folder_only = pattern.endswith("/")
        anchored = pattern.startswith("/")
        pattern = pattern.strip("/")
        if not pattern:
            continue
        by_name = "/" not in pattern and not anchored
        for k in range(1, len(parts) + 1):
            if folder_only and k == len(parts) and not is_dir:
                continue
            if fnmatchcase("/".join(parts[:k]), pattern):
                return True
            if by_name and fnmatchcase(parts[k - 1], pattern):
                return True
    return False


@dataclass(frozen=True)
class _Guard:
    """Where symlinks may lead: inside the vault (its real path) or a trusted folder."""

    vault_real: str
    trusted: tuple[str, ...]

    def refusal(self, path: str, *, is_dir: bool) -> str | None:
        return link_refusal(os.path.realpath(path), self.vault_real, self.trusted, is_dir=is_dir)


def scan_vault(
    root: Path,
    ignore: Sequence[str] = (),
    max_file_bytes: int = 5_000_000,
    *,
    under: str = "",
    follow_outside: Sequence[str] = (),
) -> ScanResult:
    """Every Markdown file under root that is not ignored, sorted by path.

    Symlinked files and folders are followed only when they lead inside the vault (not
    into a dot-folder) or into a folder of `follow_outside`, and a symlinked file only
    when it is Markdown; others are skipped with the reason. Real folders are all listed
    before any symlinked one, so a link back into the vault (or a loop) is skipped rather
    than giving its notes a second path. Files and folders whose names are not UTF-8 are
    skipped with a reason. Raises NotFound when root is not a folder and Unavailable when
    root itself cannot be listed: a vault is never taken for empty. `under` is the
    vault-relative folder that root is, when scanning one subfolder: globs then match
    vault paths, while returned paths stay relative to root.
    """
    root_path = os.fspath(root)
    try:
        root_stat = os.stat(root_path)
    except OSError as exc:
        raise NotFound(f"vault folder not found: {root_path}", path=root_path) from exc
    if not stat.S_ISDIR(root_stat.st_mode):
        raise NotFound(f"vault path is not a folder: {root_path}", path=root_path)

    ignore = tuple(ignore)
    under_parts = [p for p in under.strip("/").split("/") if p]
    base = under_parts if ignore else []
    vault_root = Path(root_path).parents[len(under_parts) - 1] if under_parts else Path(root_path)
    guard = _Guard(os.path.realpath(vault_root), trusted_roots(vault_root, follow_outside))
    result = ScanResult()
    if under_parts and guard.refusal(root_path, is_dir=True):
        # A folder of the vault reached through a symlink that leads out of it.
        result.skipped.append(("", guard.refusal(root_path, is_dir=True) or ""))
        return result
    visited = {(root_stat.st_dev, root_stat.st_ino)}
    folders: list[tuple[str, str]] = [("", root_path)]  # real folders still to list
    linked: list[tuple[str, str]] = []  # symlinked folders, listed last (heap by path)

    while folders or linked:
        if folders:
            rel, abs_path = folders.pop()
        else:
            rel, abs_path = heapq.heappop(linked)
            try:
                target = os.stat(abs_path)
            except FileNotFoundError:
                result.skipped.append((rel, "symlink target missing"))
                continue
            except OSError:
                result.unreadable_dirs.append(rel)
                continue
            key = (target.st_dev, target.st_ino)
            if key in visited:
                result.skipped.append((rel, "symlink loop or folder already scanned"))
                continue
            visited.add(key)
        try:
            fd = _open_folder(abs_path)
            try:
                with os.scandir(abs_path if fd is None else fd) as listing:
                    # By name: the rows then come nearly sorted, and sort in ~n comparisons.
                    entries = sorted(listing, key=_name)
            except BaseException:
                if fd is not None:
                    os.close(fd)
                raise
        except FileNotFoundError:
            if not rel:
                raise NotFound(f"vault folder not found: {root_path}", path=root_path) from None
            continue  # removed while we were scanning: it is gone, not unreadable
        except OSError as exc:
            if not rel:
                raise Unavailable(
                    f"vault folder cannot be listed: {root_path} ({exc.strerror})",
                    path=root_path,
                ) from exc
            result.unreadable_dirs.append(rel)
            continue
        prefix = f"{rel}/" if rel else ""
        try:
            for entry in entries:
                name = entry.name
                # The common case inline (a vault is mostly plain Markdown files): a regular
                # file (d_type: no system call), a .md name, no globs to match. The rest, and
                # any doubt (a name that is not UTF-8, a stat that fails), goes to _visit.
                if (
                    not ignore
                    and name[-3:].lower() == ".md"
                    and name[0] != "."
                    and entry.is_file(follow_symlinks=False)
                    and name.isascii()
                ):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        pass  # _visit says what went wrong
                    else:
                        if st.st_size <= max_file_bytes:
                            result.rows.append((prefix + name, st.st_mtime_ns, st.st_size))
                            continue
                _visit(
                    entry,
                    rel,
                    abs_path,
                    base,
                    ignore,
                    max_file_bytes,
                    result,
                    folders,
                    linked,
                    visited,
                    guard,
                )
        finally:
            if fd is not None:
                os.close(fd)  # after every entry's stat: a listing's entries stat through it

    result.rows.sort()  # by path: paths are unique, so a tuple sort never looks further
    result.unreadable_dirs.sort()
    result.skipped.sort()
    return result


_name = operator.attrgetter("name")


def _open_folder(path: str) -> int | None:
    """A descriptor of the folder at `path` to list it through, or None to list it by path.
    Through a descriptor, each file's stat names the file alone (fstatat), where by path the
    kernel walks every folder from the root again (with the rows as plain tuples, the scan
    of cpp-docs took ~44 -> ~34 CPU-ms: docs/benchmarks.md, "The refresh pass, round 8").
    A folder whose path is long is listed by path, so that a file the rest of vault-brain
    could not open by its path (longer than PATH_MAX) is skipped as before, not listed."""
    if not BY_DESCRIPTOR or len(os.fsencode(path)) > DESCRIPTOR_PATH_MAX:
        return None
    return os.open(path, _FOLDER_FLAGS)


def _visit(
    entry: os.DirEntry[str],
    parent: str,
    folder: str,
    base: list[str],
    ignore: tuple[str, ...],
    max_file_bytes: int,
    result: ScanResult,
    folders: list[tuple[str, str]],
    linked: list[tuple[str, str]],
    visited: set[tuple[int, int]],
    guard: _Guard,
) -> None:
    name = entry.name
    if name.startswith("."):
        return
    rel = f"{parent}/{name}" if parent else name
    path = os.path.join(folder, name)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        # os.scandir hands out undecodable bytes as surrogates: no note path can hold them.
        printable = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        if entry.is_dir(follow_symlinks=False) or is_markdown(name):
            result.skipped.append((printable, "file name is not valid UTF-8"))
        return
    parts = base + rel.split("/") if ignore else []
    try:
        if entry.is_dir(follow_symlinks=False):
            if ignore and _glob_ignored(parts, True, ignore):
                return
            try:
                own = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                raise
            except OSError:
                result.unreadable_dirs.append(rel)  # a folder all the same: keep its notes
                return
            visited.add((own.st_dev, own.st_ino))
            folders.append((rel, path))
            return
        if entry.is_symlink():
            try:
                target = entry.stat()
            except FileNotFoundError:
                if not (ignore and _glob_ignored(parts, False, ignore)):
                    result.skipped.append((rel, "symlink target missing"))
                return
            if stat.S_ISDIR(target.st_mode):
                if not (ignore and _glob_ignored(parts, True, ignore)):
                    why = guard.refusal(path, is_dir=True)
                    if why is not None:
                        result.skipped.append((rel, why))
                    else:
                        heapq.heappush(linked, (rel, path))
                return
            if not stat.S_ISREG(target.st_mode) or not is_markdown(name):
                return
            why = guard.refusal(path, is_dir=False)
            if why is not None:
                if not (ignore and _glob_ignored(parts, False, ignore)):
                    result.skipped.append((rel, why))
                return
        elif not is_markdown(name) or not entry.is_file(follow_symlinks=False):
            return
        else:
            target = entry.stat()
    except FileNotFoundError:
        return  # removed while we were scanning
    except OSError as exc:
        result.skipped.append((rel, f"cannot stat: {exc.strerror}"))
        return
    if ignore and _glob_ignored(parts, False, ignore):
        return
    if target.st_size > max_file_bytes:
        result.skipped.append((rel, f"too large: {target.st_size} bytes > {max_file_bytes}"))
        return
    result.rows.append((rel, target.st_mtime_ns, target.st_size))
