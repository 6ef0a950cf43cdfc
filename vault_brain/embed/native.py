"""The compiled kernels of the static model (vault_brain/native/static_model.c), or None where
they were not built: the Python beside them gives the same ids and vectors, only slower."""

from __future__ import annotations

from typing import Any


def static_kernels() -> Any:
    """The `static_model` extension module, or None."""
    try:
        from vault_brain.native import static_model
    except ImportError:
        return None
    return static_model


STATIC = static_kernels()
