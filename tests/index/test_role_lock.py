"""The indexer role across processes, on every backend (SQLite: an flock beside the index;
Postgres: a session advisory lock): one holder at a time, and a holder that dies is
replaced within seconds by a process that keeps asking."""

from __future__ import annotations

import os
import signal
import time
from contextlib import closing

from tests.conftest import every_backend
from tests.index.holder import held_elsewhere
from tests.waiting import HANG_SECONDS
from vault_brain.index.factory import open_index

backend = every_backend()

HOLDS_THE_ROLE = """
lock = open_index(settings).indexer_lock
assert lock.try_acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_dead_holders_role_is_taken_over_within_seconds(vault, make_settings, index_settings):
    with held_elsewhere(HOLDS_THE_ROLE, vault.root, index_settings()) as holder:
        with closing(open_index(make_settings())) as index:
            lock = index.indexer_lock
            assert lock.taken()
            assert not lock.try_acquire()
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(HANG_SECONDS)
            killed = time.monotonic()
            deadline = killed + HANG_SECONDS
            while not lock.try_acquire():
                assert time.monotonic() < deadline, "the dead holder's role was never freed"
                time.sleep(0.05)
            took = time.monotonic() - killed
            assert lock.held and lock.taken()
            lock.release()
            assert not lock.held
        print(f"\nrole taken over {took:.2f} s after its holder was killed")
