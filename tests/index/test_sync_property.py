"""Property: whatever happens to the files, and whenever sync runs, the incremental index
equals what a full rebuild from the files gives."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import every_backend
from vault_brain.config import load_settings
from vault_brain.service import Brain

backend = every_backend()

PATHS = ["a.md", "b.md", "Folder/c.md", "Folder/Deep/d.md", "Other/e.md"]
BODIES = [
    "# Alpha\n\nfirst words [[b]]\n",
    "---\nid: fixed001\ntags: [x]\n---\n# Fixed id\n\nmoves keep me [[Folder/c]]\n",
    "plain text without heading #tag/nested\n",
    "---\nbroken: [yaml\n---\nstill indexed\n",
    "# Long\n\n" + "many words here " * 300 + "\n## Part two\n\nmore\n",
    "",
]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(PATHS), st.sampled_from(BODIES)),
        st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
        st.tuples(st.just("move"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
        st.tuples(st.just("sync"), st.none(), st.none()),
        st.tuples(st.just("sync_paths"), st.sampled_from(PATHS + ["Folder"]), st.none()),
    ),
    max_size=25,
)


def _brain(vault: Path, index: dict) -> Brain:
    s = load_settings(
        vault=str(vault), env={}, overrides={"embed": {"provider": "none"}, "index": index}
    )
    return Brain(s)


# index_settings gives each example indexes of its own (fresh names), so the fixture's
# sharing between examples is harmless.
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(operations)
def test_incremental_index_equals_a_full_rebuild(index_settings, ops):
    run = uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        with _brain(vault, index_settings(f"inc-{run}")) as brain:
            for op, a, b in ops:
                if op == "write":
                    (vault / a).parent.mkdir(parents=True, exist_ok=True)
                    (vault / a).write_text(b, encoding="utf-8")
                elif op == "delete" and (vault / a).exists():
                    (vault / a).unlink()
                elif op == "move" and (vault / a).exists() and not (vault / b).exists():
                    (vault / b).parent.mkdir(parents=True, exist_ok=True)
                    os.rename(vault / a, vault / b)
                    brain.sync_paths([a, b])
                elif op == "sync":
                    brain.sync()
                elif op == "sync_paths":
                    brain.sync_paths([a])
            brain.sync()
            incremental = brain.snapshot()
        with _brain(vault, index_settings(f"full-{run}")) as fresh:
            fresh.sync()
            assert incremental == fresh.snapshot()
