"""A model2vec static model read straight from its folder: safetensors + tokenizer.json.

model2vec's own import pulls in huggingface_hub, joblib and model cards (~0.45 s), and its
load another ~0.15 s: most of a one-shot CLI search. A static model is a token table and a
mean, so for the plain format (one `embeddings` tensor, no per-token weights or vocabulary
mapping) this module does the same arithmetic with numpy and `tokenizers` alone, and gives
the same vectors (tests/test_static_model.py compares it with model2vec). Any other format
returns None from `load` and the caller uses model2vec.
"""

from __future__ import annotations

import json
import mmap
import struct
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from vault_brain.embed.static_native import STATIC

_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}
DEFAULT_MAX_LENGTH = 512  # model2vec's default when the config names none
SMALL_BATCH = 16  # up to this many texts, rows are widened as gathered (no table)
TOKENS_PER_GATHER = 2_048  # rows gathered at once: 2 MB at 256 float32 dims, still in cache


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (the format: a u64 header length, a JSON header
    of dtype/shape/offsets, then the raw little-endian bytes)."""
    with path.open("rb") as fh:  # mapped, not read: a query touches only its tokens' rows
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if len(data) < 8:
        raise ValueError(f"{path.name}: too short for a safetensors file")
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path.name}: tensor {name} has dtype {info['dtype']}")
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=_DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"])
    return out


@dataclass
class StaticModelFile:
    """The plain model2vec format, encoded as model2vec encodes it: tokens without special
    tokens (unknown ones dropped), the text cut to max_length tokens (and first to
    max_length × the median token length in characters), the mean of their rows."""

    stored: np.ndarray  # one row per token id, as the file stores it (mapped)
    tokenizer: Any  # tokenizers.Tokenizer
    unk_id: int | None
    max_length: int | None
    max_chars: int | None
    _table: np.ndarray | None = None  # the float32 table, made for the first big batch
    _pieces: Any = None  # the big batches' token ids (PieceTokens), made for the first one
    native: Any = STATIC  # the compiled kernels (embed/static_native.py), or None: numpy below

    @property
    def dim(self) -> int:
        return int(self.stored.shape[1])

    def _rows(self, ids: np.ndarray, big: bool) -> np.ndarray:
        """Rows for token ids as float32. A few texts (a query) widen only their rows;
        a batch widens the whole table once (per row it cost 4 s of a 30k-chunk index).
        float16 widens exactly, so both give model2vec's sums."""
        if self._table is None and big:
            self._table = self.stored.astype(np.float32)
        if self._table is not None:
            return self._table[ids]
        return self.stored[ids].astype(np.float32)

    @classmethod
    def load(cls, folder: Path) -> StaticModelFile | None:
        """The model in `folder`, or None when it is not the plain format."""
        weights, vocab_file = folder / "model.safetensors", folder / "tokenizer.json"
        if not (weights.is_file() and vocab_file.is_file()):
            return None
        tensors = read_safetensors(weights)
        if set(tensors) != {"embeddings"}:
            return None  # per-token weights or a vocabulary mapping: model2vec's job
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(vocab_file))
        vocab = tokenizer.get_vocab()
        embedding = tensors["embeddings"]
        if embedding.ndim != 2 or len(embedding) != len(vocab):
            return None
        config_file = folder / "config.json"
        config = json.loads(config_file.read_text("utf-8")) if config_file.is_file() else {}
        max_length = config.get("max_length", DEFAULT_MAX_LENGTH)
        padding = tokenizer.padding
        if padding is not None:  # never pad: a mean over padding would be wrong
            tokenizer.enable_padding(
                pad_id=padding["pad_id"],
                pad_token=padding["pad_token"],
                pad_type_id=padding["pad_type_id"],
                length=0,
            )
        if max_length is None:
            tokenizer.no_truncation()
            max_chars = None
        else:
            tokenizer.enable_truncation(max_length)
            max_chars = max_length * int(np.median([len(t) for t in vocab]))
        return cls(embedding, tokenizer, _unk_id(tokenizer), max_length, max_chars)

    def token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every text's token ids in one array, text after text, and each text's number of
        ids: the tokenizer's, cut to max_length. A big batch takes them from cached pieces
        (piece_tokens.py: the same ids, most of them without the tokenizer)."""
        if self.max_chars is not None:
            texts = [t[: self.max_chars] for t in texts]
        if len(texts) > SMALL_BATCH:
            if self._pieces is None:
                from vault_brain.embed.piece_tokens import PieceTokens

                self._pieces = (
                    PieceTokens.for_tokenizer(self.tokenizer, self.max_length, self.native) or False
                )
            if self._pieces:
                return self._pieces.encode(texts)
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        rows = [e.ids for e in encodings]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        ids = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
        return ids, lengths

    def encode(self, texts: list[str]) -> np.ndarray:
        """One float32 row per text (all zeros for a text with no known token)."""
        # Every text's ids in one array (a row's start and length beside it); the unknown
        # token is dropped by a mask, not by a Python loop over each token.
        ids, lengths = self.token_ids(texts)
        n = len(lengths)
        table = self._native_table(n > SMALL_BATCH)
        if table is not None:  # the same sums as below, row by row from 0.0, without gathers
            out = np.empty((n, self.dim), dtype=np.float32)
            unk = -1 if self.unk_id is None else self.unk_id
            self.native.mean_rows(ids, lengths, table, unk, out)
            return out
        if self.unk_id is not None:
            known = ids != self.unk_id
            if not known.all():
                row_of = np.repeat(np.arange(n), lengths)
                lengths = np.bincount(row_of[known], minlength=n)
                ids = ids[known]
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        out = np.zeros((n, self.dim), dtype=np.float32)
        big = n > SMALL_BATCH
        for length in np.unique(lengths).tolist():  # equal lengths: one gather and one mean
            if not length:
                continue  # no known token: a zero row
            same = np.flatnonzero(lengths == length)
            step = max(1, TOKENS_PER_GATHER // length)  # bounded memory per gather
            for at in range(0, len(same), step):
                part = same[at : at + step]
                matrix = ids[starts[part, None] + np.arange(length)]
                out[part] = self._rows(matrix, big).mean(axis=1)
        return out

    def _native_table(self, big: bool) -> np.ndarray | None:
        """The table the compiled means read: the stored one where it is float32, or float16
        widened by the CPU (F16C); else the float32 one made for big batches. None: numpy."""
        if self.native is None or not self.stored.dtype.isnative or self.dim < 2:
            return None  # (numpy sums a single column pairwise, not row by row)
        if self.stored.dtype == np.float32 or (
            self.stored.dtype == np.float16 and self.native.fast_half()
        ):
            return self.stored
        if big:
            self._rows(np.zeros(0, dtype=np.int64), big)  # widens the table once
            return self._table
        return None


def _unk_id(tokenizer: Any) -> int | None:
    """The unknown token's id, dropped from every text as model2vec drops it."""
    token = getattr(tokenizer.model, "unk_token", None)
    if token is not None:
        return tokenizer.token_to_id(token)
    if hasattr(tokenizer.model, "unk_token"):
        return None
    return json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram models
