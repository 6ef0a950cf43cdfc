"""Optional compiled parts (C, built by `pip install`): each gives the same answers as the
Python it speeds up, which stays beside it as the fallback and the tests' reference."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType


def load(name: str) -> ModuleType | None:
    """The compiled module `name`, or None where it was not built or VAULT_BRAIN_NATIVE=0
    asks for the Python (to compare, or to rule the C out when something looks wrong)."""
    if os.environ.get("VAULT_BRAIN_NATIVE", "1") == "0":
        return None
    try:
        return importlib.import_module(f"vault_brain.native.{name}")
    except ImportError:
        return None


def query_module() -> ModuleType | None:
    """The one-shot search's module (e5's query encoder, the vector scan), where it can read
    its buffers: the kept pack and sqlite-vec's vectors are little-endian."""
    return load("querynative") if sys.byteorder == "little" else None
