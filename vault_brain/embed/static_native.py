"""The compiled kernels of the static model (vault_brain.native.staticnative, built from
vault_brain/native/staticnative.c), or None where they were not built or VAULT_BRAIN_NATIVE=0:
the Python beside them (embed/piece_tokens.py, embed/static.py) gives the same ids and
vectors, only slower."""

from __future__ import annotations

from vault_brain.native import load

STATIC = load("staticnative")
