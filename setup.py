"""The optional compiled parts (vault_brain/native/*.c): each is a faster way to the same
answer as Python code kept beside it, which runs wherever the build fails or has not run
(no C compiler, another platform). `pip install -e .` builds them in place."""

from setuptools import Extension, setup

# Plain C (C99 and the CPython API), no -march flags: one build runs on every CPU of its
# architecture. optional=True: a failed compile warns and installs the rest.
NATIVE: list[Extension] = [
    # A parse worker's per-character loops: vault/blocks.py's scan, code spans and masking,
    # vault/links.py's Markdown links, the language detection's sample, the chunker's cut
    # search. A cold full-text index of cpp-docs: ~2 CPU-s less of ~19 (docs/benchmarks.md,
    # "The parse workers' per-character loops in C").
    Extension(
        "vault_brain.native._mdscan",
        sources=["vault_brain/native/_mdscan.c"],
        depends=["vault_brain/native/_mdscan_kind.h"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # text/analysis.py's analyze() of text without CJK, Thai or combining marks (its words,
    # their forms from a word -> form table, the join) and the language detection's word
    # counts: the same strings as the Python, which answers the rest.
    Extension(
        "vault_brain.native.textnative",
        ["vault_brain/native/textnative.c"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # A note's lead (vault/note.py's extract_lead and plain_inline): the regex chain per
    # line in one pass each over its code points.
    Extension(
        "vault_brain.native._mdlead",
        sources=["vault_brain/native/_mdlead.c"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # A note's read without realpath where its path holds no symlink (vault/reading.py).
    Extension(
        "vault_brain.native._readnote",
        sources=["vault_brain/native/_readnote.c"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # Simple frontmatter blocks without PyYAML's parser (vault/frontmatter.py).
    Extension(
        "vault_brain.native._frontmatter",
        sources=["vault_brain/native/_frontmatter.c"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # Frozen dataclass instances (Headings, Links) as their __init__ makes them (vault/blocks.py).
    Extension(
        "vault_brain.native._records",
        sources=["vault_brain/native/_records.c"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # e5's light query encoder and the one-shot vector scan without numpy (the forked
    # child of a one-shot search: embed/e5_native.py, index/sqlite/vecscan.py).
    # -ffp-contract=off: no fused multiply-add, so a cosine has the same bits on every CPU.
    Extension(
        "vault_brain.native.querynative",
        ["vault_brain/native/querynative.c"],
        extra_compile_args=["-O3", "-std=c99", "-ffp-contract=off"],
        optional=True,
    ),
    # The instant tier's batch encode (embed/piece_tokens.py, embed/static.py): pieces,
    # parts, the ids' join and the rows' means, the same ids and vectors byte for byte
    # (numpy's order of sums; -ffp-contract=off as above).
    Extension(
        "vault_brain.native.staticnative",
        ["vault_brain/native/staticnative.c"],
        extra_compile_args=["-O3", "-std=c99", "-ffp-contract=off"],
        optional=True,
    ),
    # cl100k_base token counts and token byte lengths for the chunker (index/chunking.py),
    # the same as rs-bpe's encode token for token: the pre-tokeniser and the byte-pair merge.
    Extension(
        "vault_brain.native.bpenative",
        ["vault_brain/native/bpenative.c"],
        depends=["vault_brain/native/bpenative_classes.h"],
        extra_compile_args=["-O2", "-std=c99"],
        optional=True,
    ),
    # The strong tier's passage encoder (embed/e5_engine.py): e5's int8 graph with the
    # quantisation, zero-point correction, GELU and norms fused around its own integer GEMM
    # (AVX-512 VNNI / AVX2 / plain C, chosen at import).
    Extension(
        "vault_brain.native.e5native",
        ["vault_brain/native/e5native.c"],
        extra_compile_args=["-O3", "-std=c99", "-ffp-contract=off"],
        optional=True,
    ),
]

setup(ext_modules=NATIVE)
