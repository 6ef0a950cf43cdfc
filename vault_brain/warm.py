"""The warm path: a CLI `search` asks the watcher or server that runs for the vault.

A one-shot `vault-brain search` pays for an interpreter, the index's imports and, on the
default settings, the e5 query model (about a second in all). A `watch` or `serve` process
has all of that loaded already, so it answers searches on a local socket: a unix socket
beside the index file (`<index dir>/search.sock`), or in the user's runtime folder when the
index is a server, that path is too long for a socket, or its folder cannot hold one. The
CLI tries it first and falls back to searching in-process when nobody answers (no watcher,
a stale socket left by a killed one, a platform without unix sockets, a watcher with other
settings).

A CLI search that nobody answered leaves a warm resident behind (vault_brain/resident.py):
a background process that answers here as a watcher does, until it is idle for a while.
A watcher or server that starts meanwhile asks it to leave (the `leave` op) and takes the
socket; `info` says who answers (status shows it).

One request per connection, one JSON line each way. Only the user who runs the watcher can
connect: the socket is 0600 in a folder of theirs. The settings that shape an answer are
fingerprinted, so a CLI run with another config or environment searches in-process rather
than getting the watcher's answer to a different question.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vault_brain import log
from vault_brain.errors import VaultBrainError

if TYPE_CHECKING:
    import socket

    from vault_brain.config import Settings
    from vault_brain.service import Brain

SOCKET_NAME = "search.sock"
PROTOCOL = 1
# AF_UNIX paths are capped at 108 bytes on Linux and 104 on macOS (with the final NUL).
MAX_SOCKET_PATH = 100
# A request or a reply larger than this is not one of ours.
MAX_LINE = 8 * 1024 * 1024
# How long the CLI waits for an answer before it searches in-process instead (a search is
# read-only, so asking twice is harmless).
ANSWER_WAIT_SECONDS = 30.0
SEARCH_ARGS = ("limit", "mode", "tags", "folder", "since", "until", "explain", "min_score")
# How long a starting watcher waits for a resident it asked to leave.
LEAVE_WAIT_SECONDS = 15.0


class Host:
    """The process that answers on the socket, as `info` reports it. A resident also brings
    the index in step before each answer (`before_search`, given the request's mode) and
    leaves when a watcher asks. (A plain class: the CLI's warm client imports this module
    for every search, and a dataclass costs its import a millisecond.)"""

    def __init__(
        self,
        kind: str = "watcher",  # watcher | resident
        *,
        keep_warm: int | None = None,  # a resident's idle limit, seconds
        before_search: Callable[[str | None], None] | None = None,
        ready: bool = True,  # a resident: False until its models are loaded
    ) -> None:
        self.kind = kind
        self.keep_warm = keep_warm
        self.before_search = before_search
        self.ready = ready
        self.pid = os.getpid()
        self.since = time.time()
        self.answered = 0
        self.fingerprint = ""  # of the settings it answers for, once listening
        self.leave = threading.Event()
        self.stop_listening: Callable[[], None] = lambda: None
        self.path: Path | None = None  # the socket, once bound
        self.inode = 0
        self._busy = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def idle_seconds(self) -> float:
        """Seconds since the last search ended; 0 while one is being answered."""
        with self._lock:
            return 0.0 if self._busy else time.monotonic() - self._last

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._last = time.monotonic()

    def busy_now(self) -> bool:
        with self._lock:
            return self._busy > 0

    def count_answer(self) -> None:
        with self._lock:
            self.answered += 1

    def info(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pid": self.pid,
            "since": round(self.since, 3),
            "keep_warm": self.keep_warm,
            "answered": self.answered,
            "fingerprint": self.fingerprint,
            "ready": self.ready,
            "idle_seconds": round(self.idle_seconds(), 1),
        }


def available() -> bool:
    import socket  # here, not at import: a first search with no socket file never needs it

    return hasattr(socket, "AF_UNIX")


def _unix_socket() -> socket.socket:
    import socket

    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)


def fingerprint(settings: Settings) -> str:
    """What must match between the CLI and the watcher for the answer to be the same."""
    shaping = {
        "vault": str(settings.vault_path),
        "index": settings.index_location,  # hashed: a server URL's password stays here
        # keep_warm says how long a resident stays, not what it answers
        "search": {k: v for k, v in asdict(settings.search).items() if k != "keep_warm"},
        "embed": asdict(settings.embed),
        "text": asdict(settings.text),
        "chunk": asdict(settings.chunk),
    }
    blob = json.dumps(shaping, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def socket_paths(settings: Settings) -> list[Path]:
    """Where the socket may be, in the order tried: beside an index file, then the runtime
    folder (named by the vault and the index, which may be a server)."""
    index = settings.index_path
    beside = [index.parent / SOCKET_NAME] if index is not None else []
    identity = f"{settings.vault_path}|{settings.index_location}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:24]
    runtime = _runtime_dir() / f"{key}.sock"
    return [p for p in (*beside, runtime) if len(os.fsencode(p)) <= MAX_SOCKET_PATH]


def _runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        return Path(base) / "vault-brain"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return _temp_dir() / f"vault-brain-{uid}"


def _temp_dir() -> Path:
    """tempfile.gettempdir()'s choice where it is plain (TMPDIR, TEMP or TMP naming a folder,
    else /tmp on POSIX), without importing tempfile (and random, shutil): every one-shot
    search without XDG_RUNTIME_DIR asks. The CLI and the resident both ask here."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value and os.path.isdir(value):
            return Path(value)
    if os.name == "posix" and os.path.isdir("/tmp"):
        return Path("/tmp")
    import tempfile

    return Path(tempfile.gettempdir())


# -- the CLI's side ---------------------------------------------------------------------


def ask_search(settings: Settings, query: str, **args: Any) -> dict[str, Any] | None:
    """The watcher's answer to a search, as SearchResult's fields, or None when no watcher
    answers for these settings (the caller then searches in-process). Raises the watcher's
    VaultBrainError when it refused the request (a bad date, an empty query)."""
    paths = [p for p in socket_paths(settings) if p.exists()]
    if not paths or not available():  # the common first search: no socket file at all
        return None
    request = {
        "v": PROTOCOL,
        "op": "search",
        "fingerprint": fingerprint(settings),
        "query": query,
        "args": {k: args.get(k) for k in SEARCH_ARGS},
    }
    for path in paths:
        reply = _exchange(path, request)
        if reply is None:
            continue
        if reply.get("ok"):
            return reply["result"]
        error = reply.get("error")
        if isinstance(error, dict) and reply.get("refused"):
            raise _error_from(error)
        return None  # another version, other settings: search here
    return None


def room_for_resident(settings: Settings) -> bool:
    """Nothing answers on this vault's socket, or only a resident for other settings (the
    config or environment changed since it started), which is asked to leave."""
    if not available():
        return False
    for path in socket_paths(settings):
        if not path.exists() or not _answers(path):
            continue
        info = _info(path)
        if info is None or info.get("kind") != "resident":
            return False  # a watcher or server (with other settings): it stays
        if info.get("fingerprint") == fingerprint(settings):
            return False  # it answers these settings already
        if not _resident_left(path):
            return False
    return True


def ask_info(settings: Settings) -> dict[str, Any] | None:
    """Who answers CLI searches for this vault (Host.info: kind, pid, since, keep_warm,
    answered, idle_seconds), or None when nobody does."""
    if not available():
        return None
    for path in socket_paths(settings):
        info = _info(path)
        if info is not None:
            return info
    return None


def _info(path: Path) -> dict[str, Any] | None:
    """What answers at `path` says of itself (Host.info), or None when nothing does."""
    reply = _exchange(path, {"v": PROTOCOL, "op": "info"})
    info = reply.get("info") if reply is not None and reply.get("ok") else None
    return info if isinstance(info, dict) else None


def _exchange(path: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    try:
        if not path.exists():
            return None
        with _unix_socket() as sock:
            sock.settimeout(ANSWER_WAIT_SECONDS)
            sock.connect(str(path))
            sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")
            line = _read_line(sock)
    except OSError:
        return None
    if line is None:
        return None
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def _error_from(payload: dict[str, Any]) -> VaultBrainError:
    from vault_brain import errors

    kinds = {
        cls.code: cls
        for cls in (errors.InvalidInput, errors.NotFound, errors.Forbidden, errors.Unavailable)
    }
    cls = kinds.get(str(payload.get("code")), VaultBrainError)
    return cls(str(payload.get("message", "the watcher refused the search")))


def _read_line(sock: socket.socket) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    while True:
        data = sock.recv(65536)
        if not data:
            return None  # closed before a whole line: not an answer
        end = data.find(b"\n")
        if end >= 0:
            parts.append(data[:end])
            return b"".join(parts)
        parts.append(data)
        size += len(data)
        if size > MAX_LINE:
            return None


# -- the watcher's side -----------------------------------------------------------------


def listen(brain: Brain, host: Host | None = None) -> Callable[[], None]:
    """Answer CLI searches for `brain`'s vault on a local socket, from a daemon thread,
    until the returned function is called. Does nothing (and says why in the log) when
    another process answers already or no socket can be made. A watcher (the default
    host) asks a resident that answers there to leave, and takes its place."""
    if not available():
        return lambda: None
    host = host or Host()
    fp = host.fingerprint = fingerprint(brain.settings)
    paths = socket_paths(brain.settings)
    for path in paths:
        try:
            server = _bind(path, evict=host.kind == "watcher")
        except _Taken:
            return lambda: None  # another process answers for the vault: not a second place
        if server is not None:
            return _start(server, path, brain, fp, host)
    if not paths:
        log.event("warm_socket_unavailable", error="no socket path short enough")
    return lambda: None


def bound_here(path: Path, inode: int) -> bool:
    """The socket file at `path` is still the one this process bound (not gone, not a
    successor's)."""
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _start(
    server: socket.socket, path: Path, brain: Brain, fp: str, host: Host
) -> Callable[[], None]:
    stop = threading.Event()
    thread = threading.Thread(
        target=_serve,
        args=(server, brain, fp, stop, host),
        name="vault-brain-warm",
        daemon=True,
    )
    thread.start()
    inode = os.stat(path).st_ino
    log.event("warm_socket", path=str(path), kind=host.kind, inode=inode)

    once = threading.Lock()

    def close() -> None:
        if not once.acquire(blocking=False):
            return  # closed already: the name may be a successor's by now
        stop.set()
        # The name goes first, while this socket still answers there: a successor replaces
        # only a socket nobody answers on, so the file checked is ours (once closed, its
        # inode number may be the successor's at once).
        try:
            if bound_here(path, inode):
                path.unlink()
        except OSError:
            pass
        try:
            import socket

            server.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (Linux)
        except OSError:
            pass
        server.close()

    host.stop_listening, host.path, host.inode = close, path, inode
    return close


class _Taken(Exception):
    """Another live process answers at the socket path."""


def _bind(path: Path, *, evict: bool = False) -> socket.socket | None:
    """A listening socket at `path`, or None when the folder cannot hold one; _Taken when
    another live process listens there (then no other path is tried). A socket file nobody
    answers on (a killed watcher's) is replaced; with `evict` (a watcher starting), so is a
    resident's, once it has left.
    One process at a time looks and binds (a lock file beside the socket), so two
    residents racing leave one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _binding(path):
            return _bind_locked(path, evict)
    except OSError as exc:
        log.event("warm_socket_unavailable", path=str(path), error=str(exc)[:200])
        return None


@contextmanager
def _binding(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the bind alone decides
        yield
        return
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _bind_locked(path: Path, evict: bool) -> socket.socket | None:
    if path.exists():
        if evict and _resident_left(path):
            pass  # its socket is gone, or nobody answers on it any more
        elif _answers(path):
            log.event("warm_socket_taken", path=str(path))
            raise _Taken
        if path.exists():
            path.unlink()
    server = _unix_socket()
    try:
        old = os.umask(0o177)  # the socket is born 0600: no window for other users
        try:
            server.bind(str(path))
        finally:
            os.umask(old)
        server.listen(16)
    except OSError:
        server.close()
        raise
    return server


def _resident_left(path: Path) -> bool:
    """Ask the resident answering at `path` to leave and wait until it has; False when
    what answers there is not a resident (a watcher, another version) or stays."""
    info = _info(path)
    if info is None or info.get("kind") != "resident":
        return False
    reply = _exchange(path, {"v": PROTOCOL, "op": "leave"})
    if not reply or not reply.get("ok"):
        return False
    deadline = time.monotonic() + LEAVE_WAIT_SECONDS
    while path.exists() and _answers(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    log.event("warm_resident_left", pid=info.get("pid"))
    return True


def _answers(path: Path) -> bool:
    try:
        with _unix_socket() as probe:
            probe.settimeout(1.0)
            probe.connect(str(path))
        return True
    except OSError:
        return False


def _serve(server: socket.socket, brain: Brain, fp: str, stop: threading.Event, host: Host) -> None:
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except OSError:
            return  # closed
        threading.Thread(
            target=_answer,
            args=(conn, brain, fp, host),
            name="vault-brain-warm-call",
            daemon=True,
        ).start()


def _answer(conn: socket.socket, brain: Brain, fp: str, host: Host) -> None:
    with conn:
        try:
            conn.settimeout(ANSWER_WAIT_SECONDS)
            line = _read_line(conn)
            reply = _reply(brain, fp, line, host)
            conn.sendall(json.dumps(reply, ensure_ascii=False, default=str).encode() + b"\n")
        except OSError:
            return  # the CLI went away; it searches in-process


def _reply(brain: Brain, fp: str, line: bytes | None, host: Host) -> dict[str, Any]:
    try:
        request = json.loads(line) if line is not None else None
    except ValueError:
        request = None
    if not isinstance(request, dict) or request.get("v") != PROTOCOL:
        return {"ok": False, "error": {"code": "PROTOCOL", "message": "not understood"}}
    op = request.get("op")
    if op == "info":
        return {"ok": True, "info": host.info()}
    if op == "leave":
        if host.kind != "resident":
            return {"ok": False, "error": {"code": "PROTOCOL", "message": "a watcher stays"}}
        host.stop_listening()  # the socket is gone before the watcher reads this reply
        host.leave.set()
        return {"ok": True}
    if request.get("fingerprint") != fp:
        return {"ok": False, "error": {"code": "SETTINGS", "message": "other settings"}}
    if op != "search":
        return {"ok": False, "error": {"code": "PROTOCOL", "message": "unknown op"}}
    args = {k: v for k, v in (request.get("args") or {}).items() if k in SEARCH_ARGS}
    args["tags"] = tuple(args.get("tags") or ())
    try:
        with host.busy():  # only a search keeps a resident (status's info does not)
            if host.before_search is not None:
                host.before_search(args.get("mode"))
            # A CLI's search: the light query encoder, as the CLI's own process would.
            result = brain.search(str(request.get("query", "")), light_query=True, **args)
    except VaultBrainError as exc:
        return {"ok": False, "refused": True, "error": exc.to_dict()}
    except Exception as exc:  # noqa: BLE001 - the CLI searches in-process and shows it
        log.warn("warm_search_failed", error=type(exc).__name__)
        return {"ok": False, "error": {"code": "INTERNAL", "message": type(exc).__name__}}
    host.count_answer()
    log.event("warm_search", hits=len(result.hits), kind=host.kind)
    from vault_brain.records import plain

    return {"ok": True, "result": plain(result)}
