"""A static model's token ids for big batches, from the pieces of text it has already seen.

A cold index tokenizes ~13M tokens (cpp-docs' 34k chunks) through `tokenizers`, whose BERT
pipeline (normaliser, pre-tokenizer, WordPiece) costs ~1 µs a token: most of the instant
tier's CPU. That pipeline is local. The normaliser maps each character on its own (control
characters out, CJK ideographs spaced, NFD, accents out, lower case), whitespace and
punctuation end words, and a word's WordPiece ids depend on the word alone. So a text's ids
are its whitespace-separated pieces' ids one after the other, and a piece's ids are those
of its parts cut at ASCII punctuation, one after the other. Most pieces and parts repeat:
their ids are kept once (a table of pieces, a dict of parts) and `tokenizers` sees only the
parts never seen before. Every text is then cut to its first max_length ids, as truncation
cuts it. The ids are `tokenizers`' own: tests compare them on every chunk of two corpora
and on generated text.

Where that locality fails, a whole text goes to `tokenizers`:
- characters Python's `split` cuts at that the normaliser deletes instead (\\x0b, \\x0c,
  \\x1c-\\x1f, \\x85: control characters, so "a\\x0bb" is one word to it), found at load
  by asking the tokenizer about each whitespace character;
- the added tokens ([UNK], [PAD], ...): matched in the raw text before normalisation.
Another kind of tokenizer (not BertNormalizer + BertPreTokenizer + WordPiece, or an added
token that is normalised or holds whitespace) gets no cache: `for_tokenizer` returns None.

Where vault_brain/native/staticnative.c is built (`native`), the split, the lookups, the cut
into parts and the join run there (no bytecode per piece); the Python below is the fallback
and the reference the tests compare it with.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import chain, pairwise
from typing import Any

import numpy as np

from vault_brain.embed.static_native import STATIC

# One ASCII punctuation character (a word of its own to the BERT pre-tokenizer), or a run
# without any: the parts a piece is cut into.
_PARTS = re.compile(r"[!-/:-@\[-`{-~]|[^!-/:-@\[-`{-~]+")
KEPT_PIECE_CHARS = 40  # a longer piece (a URL, a path, a line of code) rarely repeats
MAX_PIECES = 250_000  # pieces kept between batches (~30 MB); past it they start over
MAX_ROWS = 1_000_000  # rows of the table, kept or left by long pieces (16 MB)
MAX_IDS = 4_000_000  # ids in the table (16 MB)
MAX_PARTS = 250_000  # parts kept (a few MB)
FRONT_CHARS = STATIC.FRONT_CHARS if STATIC is not None else 0
SEPARATOR = "|"  # joins new parts into one tokenizer call (the compiled path)
PARTS_PER_CALL = 256  # parts joined into one text
JOIN_FROM = 64  # fewer new parts than this go one a text (the joiner costs ~20 ms to make)
_POST_PROCESSORS = {None, "TemplateProcessing", "BertProcessing"}  # none adds ids here


class _Rows(dict):
    """piece -> its row in the table; a piece not seen yet gets the next row and waits in
    `pending` for its ids (a lookup per piece, in C, and a call only for a new one)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[str] = []
        self.next = 0

    def __missing__(self, piece: str) -> int:
        row = self[piece] = self.next
        self.next += 1
        self.pending.append(piece)
        return row


class PieceTokens:
    """Token ids of texts, as `tokenizer.encode_batch_fast(texts, add_special_tokens=False)`
    truncated to max_length gives them, from cached pieces."""

    def __init__(
        self,
        tokenizer: Any,
        max_length: int | None,
        odd: str,
        added: tuple[str, ...],
        native: Any = STATIC,
        wordpiece: Any = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.native = native  # the compiled kernels, or None for the Python below
        self._odd_chars = odd
        self._wordpiece = wordpiece  # for the compiled WordPiece of ASCII parts, or None
        # the compiled lookups' front of short pieces' rows; new whenever one leaves _rows
        self._front = native.front() if native is not None else None
        self._joiner: Any = None  # (a tokenizer without truncation, the separator's id)
        # A text with one of these characters or added tokens goes to the tokenizer whole.
        self._odd = re.compile(f"[{re.escape(odd)}]").search if odd else None
        self._added = added
        self._rows = _Rows()  # piece -> its row in the table below
        self._parts: dict[str, list[int]] = {}  # part -> its ids
        self._starts = np.zeros(4096, dtype=np.int64)  # a row's first id in _ids
        self._counts = np.zeros(4096, dtype=np.int64)  # how many ids it has
        self._ids = np.zeros(1 << 16, dtype=np.int32)
        self._used = 0  # ids in use

    @classmethod
    def for_tokenizer(
        cls, tokenizer: Any, max_length: int | None, native: Any = STATIC
    ) -> PieceTokens | None:
        """The cache for this tokenizer, or None when its pipeline is not the BERT one."""
        spec = json.loads(tokenizer.to_str())
        kinds = (
            (spec.get("normalizer") or {}).get("type"),
            (spec.get("pre_tokenizer") or {}).get("type"),
            (spec.get("model") or {}).get("type"),
        )
        post = (spec.get("post_processor") or {}).get("type")
        if kinds != ("BertNormalizer", "BertPreTokenizer", "WordPiece"):
            return None
        if post not in _POST_PROCESSORS:
            return None
        added = spec.get("added_tokens") or []
        contents = []
        for token in added:
            content = token.get("content") or ""
            if token.get("normalized") or content.split() != [content]:
                return None  # matched after normalising, or across pieces: not local
            contents.append(content)
        gaps = _split_characters() if native is None else native.split_characters()
        odd = "".join(c for c in gaps if not _separates(tokenizer, c))
        wordpiece = _ascii_wordpiece(tokenizer, spec, native) if native is not None else None
        return cls(tokenizer, max_length, odd, tuple(contents), native, wordpiece)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every text's ids in one array, text after text, and each text's number of ids."""
        rows = self._rows
        if len(rows) > MAX_PIECES or rows.next > MAX_ROWS or self._used > MAX_IDS:
            rows.clear()
            rows.next = self._used = 0
            self._forgot()
        if len(self._parts) > MAX_PARTS:
            self._parts.clear()
        pending = rows.pending = []
        first = rows.next
        if self.native is not None:
            whole: set[str] = set()
            found_bytes, per_bytes, rows.next = self.native.split_lookup(
                texts, rows, rows.next, self._odd_chars, self._added, pending, whole, self._front
            )
            found = np.frombuffer(found_bytes, dtype=np.int64)
            per_text = np.frombuffer(per_bytes, dtype=np.int64)
        else:
            whole = {t for t in texts if self._whole(t)}
            splits = [(t,) if t in whole else t.split() for t in texts]
            per_text = np.fromiter(map(len, splits), dtype=np.int64, count=len(splits))
            found = np.fromiter(
                map(rows.__getitem__, chain.from_iterable(splits)),
                dtype=np.int64,
                count=int(per_text.sum()),
            )
        added = False
        try:
            self._add(first, pending, whole)
            added = True
            return self._join(found, per_text)
        finally:  # long pieces and whole texts leave the index (their rows stay unused),
            rows.pending = []  # and every new piece when the tokenizer failed on one
            short = False
            for p in pending:
                if not added or len(p) > KEPT_PIECE_CHARS or p in whole:
                    del rows[p]
                    short = short or len(p) <= FRONT_CHARS
            if short:
                self._forgot()

    def _forgot(self) -> None:
        """Short pieces left _rows: the compiled lookups' front of them starts over."""
        if self.native is not None:
            self._front = self.native.front()

    def _whole(self, text: str) -> bool:
        if self._odd is not None and self._odd(text):
            return True
        return any(token in text for token in self._added)

    def _add(self, first: int, pieces: list[str], whole: set[str]) -> None:
        """The ids of the table's rows from `first` on, one per new piece: a piece's from
        its parts' ids, a whole text's from the tokenizer."""
        if not pieces:
            return
        direct = dict(zip(whole, self._tokenize(list(whole)), strict=True))
        if self.native is not None:
            ids_bytes, count_bytes = self.native.piece_ids(
                pieces, direct, self._parts, self._tokenize_parts, self._wordpiece
            )
            ids = np.frombuffer(ids_bytes, dtype=np.int32)
            counts = np.frombuffer(count_bytes, dtype=np.int64)
        else:
            ids, counts = self._piece_ids(pieces, whole, direct)
        at = self._used
        self._reserve(first + len(counts), at + len(ids))
        self._ids[at : at + len(ids)] = ids
        self._counts[first : first + len(counts)] = counts
        starts = self._starts[first : first + len(counts)]
        starts[0] = at
        np.cumsum(counts[:-1], out=starts[1:])
        starts[1:] += at
        self._used = at + len(ids)

    def _piece_ids(
        self, pieces: list[str], whole: set[str], direct: dict[str, list[int]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The pieces' ids one after the other (int32) and each piece's number of them."""
        parts = [() if p in whole else _PARTS.findall(p) for p in pieces]
        new = list(set().union(*parts).difference(self._parts))
        if new:
            self._parts.update(zip(new, self._tokenize(new), strict=True))
        get = self._parts.__getitem__
        lists = [
            direct[p] if p in whole else list(chain.from_iterable(map(get, ps)))
            for p, ps in zip(pieces, parts, strict=True)
        ]
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        ids = np.fromiter(chain.from_iterable(lists), dtype=np.int32, count=int(counts.sum()))
        return ids, counts

    def _tokenize_parts(self, parts: list[str]) -> list[list[int]]:
        """New parts' ids, many parts a tokenizer call (its cost is ~6 µs a call before the
        first character): joined by SEPARATOR, the ids cut back at the separator's. Exact
        because a part holds no ASCII punctuation: the normaliser maps each character on its
        own and reorders combining marks only between two starters ('|' is one), the
        separator is a word of its own, and an added token with '|' in it turns the joining
        off. A part that gave the separator's id itself would show in the count: that call's
        parts go one a text instead."""
        joiner = self._joiner
        if joiner is None and len(parts) >= JOIN_FROM:
            joiner = self._joiner = _joiner(self.tokenizer, self._added) or False
        if not joiner:
            return self._tokenize(parts)
        tokenizer, sep = joiner
        starts = range(0, len(parts), PARTS_PER_CALL)
        texts = [SEPARATOR.join(parts[at : at + PARTS_PER_CALL]) for at in starts]
        out: list[list[int]] = []
        encodings = tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        for at, encoding in zip(starts, encodings, strict=True):
            chunk = parts[at : at + PARTS_PER_CALL]
            ids = np.asarray(encoding.ids, dtype=np.int64)
            cuts = np.flatnonzero(ids == sep)
            if len(cuts) != len(chunk) - 1:
                out.extend(self._tokenize(chunk))
                continue
            bounds = np.concatenate([[-1], cuts, [len(ids)]]).tolist()
            out.extend(ids[a + 1 : b].tolist() for a, b in pairwise(bounds))
        return out

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        return [e.ids for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    def _join(self, rows: np.ndarray, per_text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The texts' ids from their pieces' rows, each text cut to max_length."""
        if self.native is not None:
            cut = -1 if self.max_length is None else self.max_length
            ids_bytes, length_bytes = self.native.join(
                rows, per_text, self._starts, self._counts, self._ids, cut
            )
            return np.frombuffer(ids_bytes, np.int64), np.frombuffer(length_bytes, np.int64)
        n = len(per_text)
        counts = self._counts[rows]
        ends = np.cumsum(counts)
        total = int(ends[-1]) if len(ends) else 0
        # each id's place in _ids: its piece's start, then one more per id after it
        where = np.repeat(self._starts[rows] - (ends - counts), counts) + np.arange(total)
        ids = self._ids[where].astype(np.int64)
        lengths = np.bincount(np.repeat(np.arange(n), per_text), counts, minlength=n)
        lengths = lengths.astype(np.int64)
        if self.max_length is not None and (lengths > self.max_length).any():
            firsts = np.cumsum(lengths) - lengths
            place = np.arange(total) - np.repeat(firsts, lengths)
            ids = ids[place < self.max_length]
            lengths = np.minimum(lengths, self.max_length)
        return ids, lengths

    def _reserve(self, pieces: int, ids: int) -> None:
        if pieces > len(self._starts):
            size = max(pieces, 2 * len(self._starts))
            self._starts = np.resize(self._starts, size)
            self._counts = np.resize(self._counts, size)
        if ids > len(self._ids):
            self._ids = np.resize(self._ids, max(ids, 2 * len(self._ids)))


def _ascii_wordpiece(tokenizer: Any, spec: dict, native: Any) -> Any:
    """The compiled WordPiece's table for ASCII parts (the BERT pipeline on ASCII is
    clean_text's drop of control characters, lower case, and WordPiece alone), or None when
    the pipeline does more to ASCII (no clean_text) or is configured past what it holds."""
    normalizer, model = spec.get("normalizer") or {}, spec.get("model") or {}
    if not normalizer.get("clean_text", True):
        return None
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    prefix = model.get("continuing_subword_prefix", "##")
    unk = vocab.get(model.get("unk_token", "[UNK]"))
    max_chars = model.get("max_input_chars_per_word", 100)
    if unk is None or not prefix.isascii() or len(prefix) > 16 or not 0 <= max_chars <= 128:
        return None
    return native.wordpiece(vocab, prefix, unk, max_chars, bool(normalizer.get("lowercase", True)))


def _joiner(tokenizer: Any, added: tuple[str, ...]) -> tuple[Any, int] | None:
    """The tokenizer again without truncation or padding (a joined text may pass 512 ids),
    and SEPARATOR's id; None when an added token holds SEPARATOR or it is not one id."""
    from tokenizers import Tokenizer

    if any(SEPARATOR in token for token in added):
        return None
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    ids = copy.encode(SEPARATOR, add_special_tokens=False).ids
    if len(ids) != 1 or copy.encode(f"a{SEPARATOR}b", add_special_tokens=False).ids[1] != ids[0]:
        return None
    return copy, ids[0]


def _split_characters() -> list[str]:
    """The characters `str.split()` cuts at (a scan of every code point: 0.25 s; the compiled
    kernels' `split_characters` gives the same in a few ms)."""
    return [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]


def _separates(tokenizer: Any, c: str) -> bool:
    """Whether the tokenizer too takes `c` for a gap between two words."""
    apart = tokenizer.encode("a b", add_special_tokens=False).ids
    return tokenizer.encode(f"a{c}b", add_special_tokens=False).ids == apart
