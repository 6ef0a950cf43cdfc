"""A stdio server as it runs on a host that mounts the vault from a network share (NFS,
SMB): there the writer cannot exchange two names in one step (neither has
RENAME_EXCHANGE), so a replace moves the note aside and links the new bytes in, as
tests/vault/race_workers.py runs it. Started as `python share_host.py <server args>`."""

from __future__ import annotations

import sys

from vault_brain.server.__main__ import main
from vault_brain.vault import writer

if __name__ == "__main__":
    writer._EXCHANGE = None
    sys.exit(main(sys.argv[1:]))
