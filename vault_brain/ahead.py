"""A one-shot search's stat pass, begun in a forked child before this process imports and
opens the rest (service, the index, the Brain: ~35 ms of a first search on cpp-docs).

A one-shot CLI search with no watcher first catches the index up with the files (its
refresh pass): a stat of every Markdown file of the vault, ~35 CPU-ms on cpp-docs (9,746
notes), half of it in the kernel. A thread could not overlap it with the imports before it:
they hold the GIL, and a stat pass that needs it back after each of its ~10,000 system
calls then crawls (vault_brain/embed/early.py says the same of the query model's start). A
forked child lists the vault on another core and hands its rows back through a pipe; the
refresh pass (Indexer.catch_up_if_unwatched) then compares them with the index, under the
indexer lock, as it compares a scan of its own. The child starts after the command did, so
every change made before it is seen.

Only where fork is safe without exec (Linux) and a second core looks idle. Whatever
goes wrong there (a vault that cannot be listed, a signal), `result` gives None and the pass
scans in this process, which raises what is wrong, as it would have.
"""

from __future__ import annotations

import marshal
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vault_brain.config import Settings
    from vault_brain.vault.scan import ScanResult

# The pipe holds the child's whole answer (~720 KB of rows on cpp-docs) where the kernel
# allows it, so the child ends at once instead of waiting for this process to read.
PIPE_BYTES = 1 << 20


def _scan_key(settings: Settings) -> tuple:
    """What a scan depends on: a pass uses a scan begun ahead only when it is the same."""
    v = settings.vault
    return (
        str(settings.vault_path),
        tuple(v.ignore),
        v.max_file_bytes,
        tuple(v.follow_outside),
    )


def can_fork() -> bool:
    """Fork without exec is safe here, and this process may use a second core."""
    return _cores() >= 2


def spare_core() -> bool:
    """can_fork(), and a second core looks idle (1-minute load average ≤ cores − 1). On a
    busy machine the child would only queue for a core: it saves no time there and costs
    ~5–8 CPU-ms (the fork, its copy-on-write faults, the rows through the pipe)."""
    cores = _cores()
    if cores < 2:
        return False
    try:
        return os.getloadavg()[0] <= cores - 1
    except OSError:
        return False


def _cores() -> int:
    """The cores this process may use where fork without exec is safe (Linux), else 0."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return 0
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class ScanAhead:
    """The stat pass over a vault, begun in a forked child. A future of a kind: `result()`
    waits for it; `discard()` when it is not wanted."""

    def __init__(self, settings: Settings) -> None:
        from vault_brain.vault.scan import ScanResult, scan_vault  # before the fork

        self.key = _scan_key(settings)
        self._result_type = ScanResult
        root, ignore, max_bytes, follow = self.key
        read, write = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass  # the child then waits for result() to read the rest
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(
                lambda: scan_vault(settings.vault_path, ignore, max_bytes, follow_outside=follow),
                write,
            )
        os.close(write)
        self.pid = pid
        self._pid: int | None = pid  # until reaped
        self._fd: int | None = read

    def for_settings(self, settings: Settings) -> bool:
        """This scan is of the vault, with the rules, that `settings` name."""
        return self.key == _scan_key(settings)

    def result(self) -> ScanResult | None:
        """The child's scan, or None when it gave none (scan in this process instead)."""
        if self._fd is None:
            return None
        chunks: list[bytes] = []
        try:
            while block := os.read(self._fd, PIPE_BYTES):
                chunks.append(block)
        except OSError:
            chunks = []
        status = self._close(kill=False)
        if status != 0 or not chunks:
            return None
        try:
            rows, unreadable, skipped = marshal.loads(b"".join(chunks))
        except (EOFError, ValueError, TypeError):
            return None
        return self._result_type(rows=rows, unreadable_dirs=unreadable, skipped=skipped)

    def discard(self) -> None:
        self._close(kill=True)

    def _close(self, *, kill: bool) -> int | None:
        """Close the pipe and reap the child; its exit status (None when unknown)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        status = None
        if self._pid is not None:
            if kill:
                try:
                    os.kill(self._pid, 9)
                except ProcessLookupError:
                    pass
            try:
                _, raw = os.waitpid(self._pid, 0)
                status = os.waitstatus_to_exitcode(raw)
            except ChildProcessError:
                pass
            self._pid = None
        return status


def begin(settings: Settings) -> ScanAhead | None:
    """The vault's stat pass begun in a child, where a spare core can run it beside this
    process; else None (the pass scans in this process)."""
    if not spare_core():
        return None
    try:
        return ScanAhead(settings)
    except OSError:  # no process or pipe to spare: the pass scans here
        return None


def _child(scan, fd: int) -> None:  # noqa: ANN001 - a callable giving a ScanResult
    """Scan, write, and leave at once: no atexit handler, finaliser or buffered output of
    the parent's runs twice (os._exit), whatever happens here. Exit status 0 only with the
    whole answer written."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):  # the parent speaks for the command
            os.dup2(devnull, stream)
        found = scan()
        view = memoryview(marshal.dumps((found.rows, found.unreadable_dirs, found.skipped)))
        while view:
            view = view[os.write(fd, view) :]
        code = 0
    except BaseException:  # noqa: BLE001 - the parent learns of it by the exit status
        pass
    finally:
        os._exit(code)
