"""The compiled kernels of the static model (vault_brain/_staticnative, built from
vault_brain/native/staticnative.c), or None where they were not built: the Python beside
them (embed/piece_tokens.py, embed/static.py) gives the same ids and vectors, only slower."""

from __future__ import annotations

from typing import Any


def static_kernels() -> Any:
    """The `_staticnative` extension module, or None."""
    try:
        from vault_brain import _staticnative
    except ImportError:
        return None
    return _staticnative


STATIC = static_kernels()
