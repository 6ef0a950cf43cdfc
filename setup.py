"""The optional compiled parts (vault_brain/native/*.c): each is a faster way to the same
answer as Python code kept beside it, which runs wherever the build fails or has not run
(no C compiler, another platform). `pip install -e .` builds them in place."""

from setuptools import Extension, setup

# Plain C (C99 and the CPython API), no -march flags: one build runs on every CPU of its
# architecture. optional=True: a failed compile warns and installs the rest.
NATIVE: list[Extension] = [
    # The instant tier's batch encode (embed/piece_tokens.py, embed/static.py): pieces,
    # parts, the ids' join and the rows' means, the same ids and vectors byte for byte.
    Extension(
        "vault_brain.native.static_model",
        ["vault_brain/native/static_model.c"],
        extra_compile_args=["-O3", "-std=c99", "-fno-fast-math"],
        optional=True,
    ),
]

setup(ext_modules=NATIVE)
