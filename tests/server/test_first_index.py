"""The first minutes of a never-indexed vault over stdio: answers come at once, from what is
indexed so far, and say so (`indexing: {done, total}`) until the first pass is complete."""

from __future__ import annotations

import pytest

from tests.server.harness import stdio_client_for
from tests.waiting import HANG_SECONDS, wait_until

# A 12,000-note vault: the slow tail.
pytestmark = pytest.mark.slow


def big_vault(root, count: int = 12000):
    for n in range(count):
        folder = root / f"Area {n % 25}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Note {n}.md").write_text(
            f"# Note {n}\n\nlambda capture by reference, example {n}.\n\n" + "text " * 300,
            encoding="utf-8",
        )
    return root


def test_search_during_the_first_pass_answers_and_says_it_is_partial(tmp_path):
    vault = big_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path)
    try:
        replies = []

        def complete() -> bool:
            replies.append(client.ok("memory_search", {"query": "lambda capture by reference"}))
            return "indexing" not in replies[-1]

        wait_until(complete, "the first pass finishing", timeout=10 * HANG_SECONDS, every=0.2)
        partial = [r for r in replies if "indexing" in r]
        # Answered while the pass ran (so without waiting for it), saying how far it was.
        assert partial, "the first pass finished before any search saw it running"
        for r in partial:
            assert 0 <= r["indexing"]["done"] < r["indexing"]["total"] == 12000
        assert replies[-1]["results"]
    finally:
        client.close()
