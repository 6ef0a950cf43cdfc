"""The indexer role across processes, on every backend (SQLite: an flock beside the index;
Postgres: a session advisory lock): one holder at a time, and a holder that dies is
replaced within seconds by a process that keeps asking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

from tests.conftest import every_backend
from vault_brain.index.factory import open_index

backend = every_backend()
REPO = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from vault_brain.config import load_settings
    from vault_brain.index.factory import open_index
    vault, index = sys.argv[1], json.loads(sys.argv[2])
    settings = load_settings(vault=vault, env={}, overrides={"index": index})
    lock = open_index(settings).indexer_lock
    assert lock.try_acquire()
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_dead_holders_role_is_taken_over_within_seconds(vault, make_settings, index_settings):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(vault.root), json.dumps(index_settings())],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with closing(open_index(make_settings())) as index:
            lock = index.indexer_lock
            assert lock.taken()
            assert not lock.try_acquire()
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(30)
            killed = time.monotonic()
            deadline = killed + 30
            while not lock.try_acquire():
                assert time.monotonic() < deadline, "the dead holder's role was never freed"
                time.sleep(0.05)
            took = time.monotonic() - killed
            assert lock.held and lock.taken()
            lock.release()
            assert not lock.held
        print(f"\nrole taken over {took:.2f} s after its holder was killed")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
