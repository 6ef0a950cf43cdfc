"""e5's light query encoder in C (vault_brain/native/querynative.c), without numpy.

A one-shot CLI search answers its vector arm in a forked child (oneshot.py), whose chain is
the search's critical path; numpy's import was ~50 ms of it, for the light encoder
(e5_query.py) and the KNN (index/sqlite/matrix.py). Where the optional C module is built,
this reads the same kept pack (e5_query.light_pack) through memoryviews: the tokenizer's
tables (the pieces' keys searched with bisect, the normalisation map) and the encoder's
arrays, handed to the C encoder as buffers. The integer sums are e5_query's; its float
steps sum otherwise (native/querynative.c), so the vector is not bit-equal to numpy's
(cosine ~0.9997, as close to the exact model: tests/embed/test_e5_native.py). Hence
every process that answers CLI searches takes this encoder when the module is built
(embed/e5.py `_native`), and a query gives the same bytes from each.
"""

from __future__ import annotations

import math
import mmap
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any

from vault_brain.embed import e5_kept
from vault_brain.embed.e5_tokenizer import (
    E5Tokenizer,
    Normalisation,
    UnigramEncoder,
    wanted_key_set,
)
from vault_brain.embed.e5_weights import BLOCK, Q4_BYTES, Header, Vocabulary

_MATRICES = ("qkv", "ao", "fi", "fo")
_PARTS = ("codes", "scale", "sums", "b")


def native() -> Any:
    """The C module, or None where it is not built (or cannot read this byte order)."""
    from vault_brain.native import query_module

    return query_module()


def array_order(layers: int) -> list[str]:
    """The encoder's arrays in the order the C Encoder takes them."""
    names = ["emb.positions", "emb.ln.w", "emb.ln.b"]
    for layer in range(layers):
        p = f"l{layer}."
        names += [f"{p}{m}.{part}" for m in _MATRICES for part in _PARTS]
        names += [f"{p}aln.w", f"{p}aln.b", f"{p}oln.w", f"{p}oln.b"]
    return names


def unpack(buffer: Any) -> tuple[dict[str, Any], dict[str, memoryview]]:
    """(meta, arrays) of a kept pack as e5_query.unpack reads it, each array a flat
    memoryview of `buffer` in its type (nothing copied). ValueError when it is not a
    whole pack."""
    meta, entries = e5_kept.directory(buffer)
    view = memoryview(buffer).cast("B")
    arrays = {}
    for name, (offset, dtype, shape) in entries.items():
        fmt = e5_kept.FORMATS[dtype]
        arrays[name] = view[offset : offset + math.prod(shape) * array(fmt).itemsize].cast(fmt)
    return meta, arrays


def open_light(buffer: Any, weights_path: Path) -> tuple[E5Tokenizer, NativeEncoder]:
    """e5_query.open_light's tokenizer and encoder, numpy-free: over the pack's views and
    the weights file's word vectors. ValueError or OSError when the pack does not fit
    that file, RuntimeError when the C module is not built."""
    module = native()
    if module is None:
        raise RuntimeError("vault_brain.native.querynative is not built")
    meta, arrays = unpack(buffer)
    try:
        h, (bos, eos, pad, unk), (word_offset, word_bytes), weights_bytes = e5_kept.header(meta)
        with open(weights_path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if len(mapped) != weights_bytes or word_bytes != Q4_BYTES * h.vocab_rows * (
            h.hidden // BLOCK
        ):
            raise ValueError("the kept query file does not fit the weights file")
        words = memoryview(mapped)[word_offset : word_offset + word_bytes]
        scores = arrays["vocab.scores"]
        vocab = Vocabulary(arrays["vocab.blob"], arrays["vocab.offsets"], scores, bos, eos,
                           pad, unk)  # fmt: skip
        if len(vocab.offsets) != len(scores) + 1 or not all(
            0 <= i < len(scores) for i in (bos, eos, pad, unk)
        ):
            raise ValueError("the kept vocabulary is inconsistent")
        encoder = NativeEncoder(
            h,
            module.Encoder(
                h.hidden,
                h.layers,
                h.heads,
                h.ffn,
                h.max_positions,
                h.vocab_rows,
                h.eps,
                words,
                [arrays[n] for n in array_order(h.layers)],
            ),  # fmt: skip
        )
        lattice = KeptLattice(vocab, arrays)
        return E5Tokenizer(vocab, KeptNormalisation(arrays), lattice=lattice), encoder
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"the kept query file is malformed: {exc!r}") from exc


class NativeEncoder:
    """The C encoder with e5_query.QueryEncoder's face: `vectors(ids)` (unit length, as
    array('f'), no numpy) for searches, `pooled(ids)` (numpy) for the reference check."""

    native = True

    def __init__(self, header: Header, encoder: Any) -> None:
        self.header = header
        self._encoder = encoder

    def vectors(self, ids: list[list[int]]) -> list[array]:
        out = []
        for x in ids:
            v = array("f")
            v.frombytes(self._encoder.vector(x))
            out.append(v)
        return out

    def pooled(self, ids: list[list[int]]) -> Any:
        """[len(ids), hidden] float32, unnormalised (what QueryEncoder.pooled gives)."""
        import numpy as np

        out = np.zeros((len(ids), self.header.hidden), dtype=np.float32)
        for row, x in enumerate(ids):
            out[row] = np.frombuffer(self._encoder.pooled(x), dtype=np.float32)
        return out


class KeptLattice(UnigramEncoder):
    """e5_tokenizer.KeptUnigram over memoryviews: a text's keys found in the sorted keys by
    bisect (~300 keys, two searches each) instead of numpy's searchsorted; the same
    candidate pieces, so the same ids."""

    def __init__(self, vocab: Vocabulary, tables: dict[str, memoryview]) -> None:
        self._vocab = vocab
        self._sorted = tables["unigram.keys"]  # 'Q', ascending
        self._ids = tables["unigram.ids"]  # 'i'
        unk_score, longest = tables["unigram.unk_longest"]
        self._unk_score, self._longest = float(unk_score), int(longest)
        self._unk = vocab.unk

    def _pieces_in(self, data: bytes) -> tuple[dict[bytes, int], dict[int, float]]:
        keys, ids = self._sorted, self._ids
        found: list[int] = []
        for key in sorted(wanted_key_set(data)):
            lo = bisect_left(keys, key)
            if lo < len(keys) and keys[lo] == key:
                found += ids[lo : bisect_right(keys, key, lo)].tolist()
        found.sort()  # ascending ids, as UnigramEncoder's (a later equal piece wins)
        offsets, blob, scores = self._vocab.offsets, self._vocab.blob, self._vocab.scores
        pieces = {bytes(blob[offsets[i] : offsets[i + 1]]): i for i in found}
        return pieces, {i: scores[i] for i in found}


class KeptNormalisation(Normalisation):
    """e5_tokenizer.Normalisation over memoryviews (bisect instead of searchsorted)."""

    def table(self, text: str) -> dict[int, str]:
        keys, at, to = self._from, self._at, self._to
        out = {}
        for char in {ord(c) for c in text}:
            i = bisect_left(keys, char)
            if i < len(keys) and keys[i] == char:
                out[char] = "".join(map(chr, to[at[i] : at[i + 1]].tolist()))
        return out
