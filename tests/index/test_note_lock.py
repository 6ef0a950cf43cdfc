"""The per-note write lock of a server index (index/port.py's `Index.note_lock`; Postgres: an
advisory lock keyed by the vault's schema and the note's name), across processes as across
hosts: one holder per note, other notes free, and a holder that dies (kill -9) frees it at
once, so the other host's write proceeds."""

from __future__ import annotations

import os
import signal
import time
from contextlib import closing

import pytest

from tests.index.holder import held_elsewhere
from tests.waiting import HANG_SECONDS
from vault_brain.errors import Unavailable
from vault_brain.index.factory import open_index

HOLDS_THE_NOTE = """
with open_index(settings).note_lock("Projects/Inbox.md"):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def backend() -> str:
    """Only a server index is shared by hosts (SQLite's note lock is the vault's flock)."""
    return "postgres"


def _free(index, path: str) -> bool:
    try:
        with index.note_lock(path, timeout=0.05):
            return True
    except Unavailable:
        return False


def test_a_note_lock_holds_across_processes_and_dies_with_its_holder(
    vault, make_settings, index_settings
):
    with held_elsewhere(HOLDS_THE_NOTE, vault.root, index_settings()) as holder:
        with closing(open_index(make_settings())) as index:
            assert not _free(index, "Projects/Inbox.md")
            # One name on a case-insensitive disk: one lock.
            assert not _free(index, "projects/INBOX.md")
            assert _free(index, "Projects/Other.md")
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(HANG_SECONDS)
            killed = time.monotonic()
            deadline = killed + HANG_SECONDS
            while not _free(index, "Projects/Inbox.md"):
                assert time.monotonic() < deadline, "the dead holder's note lock was never freed"
            took = time.monotonic() - killed
        print(f"\nnote lock free {took:.2f} s after its holder was killed")


def test_a_note_lock_is_free_again_when_its_block_ends(make_settings):
    with (
        closing(open_index(make_settings())) as first,
        closing(open_index(make_settings())) as second,
    ):
        with first.note_lock("Inbox.md"):
            assert not _free(second, "Inbox.md")
        assert _free(second, "Inbox.md")
        with pytest.raises(RuntimeError), first.note_lock("Inbox.md"):
            raise RuntimeError("a write that failed")
        assert _free(second, "Inbox.md")
