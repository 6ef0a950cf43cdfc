"""Another process that holds an index lock until it is killed (the role and note lock tests).

`held_elsewhere(code, vault, index)` runs `code` after opening the index named by the
`index` settings; the code takes its lock and prints "held". The context yields the process
once it has said so, and kills it on the way out whatever happened."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.waiting import HANG_SECONDS

REPO = Path(__file__).resolve().parents[2]

PRELUDE = """
import json, sys, time
from vault_brain.config import load_settings
from vault_brain.index.factory import open_index
vault, index = sys.argv[1], json.loads(sys.argv[2])
settings = load_settings(vault=vault, env={}, overrides={"index": index})
"""


@contextmanager
def held_elsewhere(code: str, vault: Path, index: dict) -> Iterator[subprocess.Popen]:
    script = PRELUDE + textwrap.dedent(code)
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(vault), json.dumps(index)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(HANG_SECONDS)
