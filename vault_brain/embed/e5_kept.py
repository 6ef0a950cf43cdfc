"""The kept query pack's layout (e5_query.pack writes it), read without numpy: the magic,
the directory's length, a JSON directory, then the arrays, each at a multiple of 64 bytes.
e5_query makes numpy views of the arrays, e5_native memoryviews (in a one-shot search's
forked child, which imports no numpy); both read the layout and the header here."""

from __future__ import annotations

import json
import math
from array import array
from typing import Any

from vault_brain.embed.e5_weights import BLOCK, Header

KEPT_MAGIC = b"E5QK"  # the kept file's first bytes
ALIGN = 64  # every array of the kept file starts at a multiple of this
# The arrays' dtypes (numpy's names) as array module codes.
FORMATS = {"<f4": "f", "|i1": "b", "|u1": "B", "<i8": "q", "<u8": "Q", "<i4": "i",
           "<u4": "I", "<f8": "d"}  # fmt: skip


def aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def directory(buffer: Any) -> tuple[dict[str, Any], dict[str, tuple[int, str, tuple[int, ...]]]]:
    """(meta, {name: (offset in `buffer`, dtype, shape)}) of a pack, each array checked to
    lie inside it. ValueError when it is not a whole pack (another file, a truncated one,
    one with bytes added)."""
    size = len(buffer)
    if size < 8 or bytes(buffer[:4]) != KEPT_MAGIC:
        raise ValueError("not a kept query file")
    n = int.from_bytes(bytes(buffer[4:8]), "little")
    try:
        head = json.loads(bytes(buffer[8 : 8 + n]))
        start = aligned(8 + n)
        if start + int(head["bytes"]) != size:
            raise ValueError("the kept query file has the wrong size")
        arrays = {}
        for name, (offset, dtype, shape) in head["arrays"].items():
            nbytes = math.prod(shape) * array(FORMATS[dtype]).itemsize
            if offset < 0 or start + offset + nbytes > size:
                raise ValueError(f"{name} lies outside the kept query file")
            arrays[name] = (start + offset, dtype, tuple(shape))
        return head["meta"], arrays
    except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"the kept query file's directory is malformed: {exc}") from exc


def header(meta: dict[str, Any]) -> tuple[Header, tuple[int, ...], tuple[int, int], int]:
    """(the model's header, the vocabulary's bos/eos/pad/unk, the word vectors' offset and
    length in the weights file, that file's size) from a pack's meta. KeyError, TypeError
    or ValueError when they are missing or implausible."""
    hidden, layers, heads, ffn, rows, positions, types, eps = meta["header"]
    h = Header(int(hidden), int(layers), int(heads), int(ffn), int(rows), int(positions),
               int(types), float(eps))  # fmt: skip
    specials = tuple(int(x) for x in meta["specials"])
    word_offset, word_bytes = (int(x) for x in meta["words"])
    if h.hidden <= 0 or h.hidden % BLOCK or h.heads <= 0 or h.hidden % h.heads or h.vocab_rows <= 0:
        raise ValueError("the kept query file's header is implausible")
    return h, specials, (word_offset, word_bytes), int(meta["weights_bytes"])
