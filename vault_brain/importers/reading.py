"""Reading export files: a JSON list one item at a time, JSON lines, times, text blocks.

Exports run to hundreds of megabytes (a ChatGPT conversations.json holds every branch and
its metadata). Loading one whole would take several times that in memory, so a top-level
list is decoded one conversation at a time. Every error names the file and the place
(line and column, or the item), so a person can look.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from vault_brain.errors import InvalidExport

_CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")


@contextmanager
def open_text(path: Path, inside_zip: tuple[str, ...] = ()) -> Iterator[tuple[TextIO, str]]:
    """The file as UTF-8 text, and its name for messages. A .zip (the archive an export
    arrives in) gives the first of `inside_zip` it holds, e.g. conversations.json."""
    name = path.name
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                member = _member(archive, inside_zip, name)
                with archive.open(member) as raw:
                    yield _decoded(raw), f"{name}/{member}"
            return
        with open(path, "rb") as raw:
            yield _decoded(raw), name
    except FileNotFoundError:
        raise InvalidExport(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InvalidExport(f"{path}: a folder, not an export file") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise InvalidExport(f"{path}: cannot be read ({exc})") from None


def _member(archive: zipfile.ZipFile, wanted: tuple[str, ...], name: str) -> str:
    members = archive.namelist()
    for want in wanted:
        for member in members:
            if member.rsplit("/", 1)[-1] == want:
                return member
    raise InvalidExport(
        f"{name}: the archive holds no {' or '.join(wanted) or 'export file'}; "
        "give that file, or the archive the export came in"
    )


def _decoded(raw: Any) -> TextIO:
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")


def iter_json_list(fh: TextIO, name: str, key: str) -> Iterator[tuple[int, Any]]:
    """(index, item) of the file's top-level JSON list, one item in memory at a time. A
    top-level object holding the list under `key` ({"conversations": [...]}) is read
    whole. Raises InvalidExport for text that is not JSON, or not such a list."""
    reader = _Stream(fh, name)
    first = reader.peek()
    if first == "{":
        data = reader.load_rest()
        if isinstance(data, dict) and isinstance(data.get(key), list):
            yield from enumerate(data[key])
            return
        raise InvalidExport(f"{name}: expected a JSON list of {key}, found an object without one")
    if first != "[":
        what = "an empty file" if first == "" else "text that is not a JSON list"
        raise InvalidExport(f"{name}: expected a JSON list of {key}, found {what}")
    reader.take("[")
    index = 0
    if reader.peek() == "]":
        reader.take("]")
    else:
        while True:
            yield index, reader.value()
            index += 1
            sep = reader.peek()
            if sep == ",":
                reader.take(",")
                continue
            if sep == "]":
                reader.take("]")
                break
            raise reader.error(f"expected ',' or ']' after item {index - 1}")
    if reader.peek() != "":
        raise reader.error("extra text after the end of the list")


class _Stream:
    """A text buffer over a file, read a megabyte at a time, that decodes one JSON value at
    a time and knows the line and column of where it is."""

    def __init__(self, fh: TextIO, name: str) -> None:
        self.fh, self.name = fh, name
        self.buf, self.pos, self.eof = "", 0, False
        self.lines_before, self.col_before = 0, 0  # of the text dropped from the buffer
        self.decoder = json.JSONDecoder()

    def _more(self, at_least: int = _CHUNK) -> bool:
        if self.eof:
            return False
        if self.pos > len(self.buf) // 2:
            dropped = self.buf[: self.pos]
            newlines = dropped.count("\n")
            self.lines_before += newlines
            last = dropped.rfind("\n")
            self.col_before = (
                len(dropped) - last - 1 if last >= 0 else self.col_before + len(dropped)
            )
            self.buf, self.pos = self.buf[self.pos :], 0
        try:
            text = self.fh.read(max(at_least, _CHUNK))
        except UnicodeDecodeError:
            raise InvalidExport(
                f"{self.name}: not UTF-8 text (a bad byte near line {self._line_col()[0]})"
            ) from None
        if not text:
            self.eof = True
            return False
        self.buf += text
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos : self.pos + 1]

    def take(self, char: str) -> None:
        self.peek()
        self.pos += len(char)

    def value(self) -> Any:
        """The next JSON value. It counts as whole only when a character follows it (a
        number cut at the buffer's end would otherwise read as a shorter number)."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
                if end < len(self.buf) or self.eof:
                    self.pos = end
                    return value
            except json.JSONDecodeError as exc:
                if self.eof:
                    cut = exc.msg.startswith("Unterminated") or not self.buf[exc.pos :].strip()
                    raise self.error(f"not valid JSON ({exc.msg})", exc.pos, cut) from None
            except RecursionError:
                raise self.error("JSON nested too deeply") from None
            self._more(len(self.buf))  # doubling: a long item costs linear time

    def load_rest(self) -> Any:
        while self._more():
            pass
        try:
            return json.loads(self.buf[self.pos :])
        except json.JSONDecodeError as exc:
            cut = exc.msg.startswith("Unterminated") or not exc.doc[exc.pos :].strip()
            raise self.error(f"not valid JSON ({exc.msg})", self.pos + exc.pos, cut) from None
        except RecursionError:
            raise self.error("JSON nested too deeply") from None

    def _line_col(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        newlines = self.buf.count("\n", 0, pos)
        if newlines:
            return self.lines_before + newlines + 1, pos - self.buf.rfind("\n", 0, pos)
        return self.lines_before + 1, self.col_before + pos + 1

    def error(self, what: str, pos: int | None = None, cut: bool = False) -> InvalidExport:
        line, col = self._line_col(pos)
        hint = " (the file ends too early: is it complete?)" if cut else ""
        return InvalidExport(f"{self.name}: line {line}, column {col}: {what}{hint}")


def iso_time(value: Any) -> str | None:
    """An export's time as ISO 8601 UTC with a Z, to the second; None when there is none or
    it cannot be read (a time is never worth refusing a conversation for). Accepts ISO
    text (a naive one is UTC) and Unix epochs in seconds or milliseconds."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if abs(value) > 1e11 else value
            moment = datetime.fromtimestamp(seconds, UTC)
        elif isinstance(value, str) and value.strip():
            moment = datetime.fromisoformat(value.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            return None
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return None


def block_text(blocks: list[Any]) -> str:
    """The text of a list of content blocks ({"type": "text", "text": ...} or plain
    strings), paragraphs apart. Other blocks (tool calls, images, thinking) are left out."""
    parts = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
    return "\n\n".join(p.strip() for p in parts if p.strip())


def shape(value: Any) -> str:
    """A JSON value's kind, as a person reads it in an error."""
    return {
        dict: "an object",
        list: "a list",
        str: "text",
        bool: "true/false",
        type(None): "null",
    }.get(type(value), "a number")
