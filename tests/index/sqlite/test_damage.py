"""A damaged full-text index is found (FTS5's integrity check before the first pass, and
any "malformed" error a read meets) and rebuilt from the files: answers equal a fresh
index again, and nothing a person wrote is touched."""

from __future__ import annotations

import random

from vault_brain.errors import Unavailable
from vault_brain.index.sqlite.db import connect


def write_notes(vault, count: int = 400) -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "kiln", "glaze", "tide", "ferry"]
    for n in range(count):
        text = " ".join(rng.choice(words) + str(rng.randrange(60)) for _ in range(60))
        vault.write(f"F{n % 9}/Note {n}.md", f"# Note {n}\n\n{text}\n")


def damage_fts(index_path) -> None:
    conn = connect(index_path)
    rows = conn.execute("SELECT id, length(block) FROM chunks_fts_data").fetchall()
    for block_id, size in random.Random(3).sample(rows[2:], 5):
        conn.execute(
            "UPDATE chunks_fts_data SET block = randomblob(?) WHERE id = ?", (size, block_id)
        )
    conn.close()


def answers(brain) -> list[list[str]]:
    return [
        [h.path for h in brain.search(q, mode="fts", limit=20).hits]
        for q in ("alpha7 kiln3", "glaze12", "tide5 ferry9 delta1", "beta0")
    ]


def test_damaged_full_text_pages_are_found_and_rebuilt_on_the_next_pass(vault, make_brain):
    write_notes(vault)
    brain = make_brain()
    want, before = answers(brain), brain.snapshot()
    brain.close()
    damage_fts(brain.settings.index_path)
    repaired = make_brain(sync=False, index={"fresh_read_seconds": 3600})
    repaired.sync()
    assert answers(repaired) == want
    assert repaired.snapshot() == before


def test_a_read_that_meets_damage_says_unavailable_and_the_next_pass_repairs(vault, make_brain):
    write_notes(vault)
    brain = make_brain()
    want = answers(brain)
    brain.close()
    damage_fts(brain.settings.index_path)
    damaged = make_brain(sync=False, index={"fresh_read_seconds": 3600})
    seen = []
    for _ in range(3):
        try:
            seen.append(answers(damaged))
        except Unavailable as exc:
            assert exc.retryable
            seen.append(None)
    assert seen == [None, None, None]  # no wrong answers: each read refused, retryable
    damaged.sync()  # the pass after damage was met (a server's watcher starts one at once)
    assert answers(damaged) == want
