"""The warm path: a CLI `search` asks the watcher or server that runs for the vault.

A one-shot `vault-brain search` pays for an interpreter, the index's imports and, on the
default settings, the e5 query model (about a second in all). A `watch` or `serve` process
has all of that loaded already, so it answers searches on a local socket: a unix socket
beside the index file (`<index dir>/search.sock`), or in the user's runtime folder when the
index is a server, that path is too long for a socket, or its folder cannot hold one. The
CLI tries it first and falls back to searching in-process when nobody answers (no watcher,
a stale socket left by a killed one, a platform without unix sockets, a watcher with other
settings).

One request per connection, one JSON line each way. Only the user who runs the watcher can
connect: the socket is 0600 in a folder of theirs. The settings that shape an answer are
fingerprinted, so a CLI run with another config or environment searches in-process rather
than getting the watcher's answer to a different question.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vault_brain import log
from vault_brain.errors import VaultBrainError

if TYPE_CHECKING:
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


def available() -> bool:
    return hasattr(socket, "AF_UNIX")


def fingerprint(settings: Settings) -> str:
    """What must match between the CLI and the watcher for the answer to be the same."""
    shaping = {
        "vault": str(settings.vault_path),
        "index": settings.index_location,  # hashed: a server URL's password stays here
        "search": asdict(settings.search),
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
    import tempfile  # (and random): not for a client whose runtime folder is set

    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"vault-brain-{uid}"


# -- the CLI's side ---------------------------------------------------------------------


def ask_search(settings: Settings, query: str, **args: Any) -> dict[str, Any] | None:
    """The watcher's answer to a search, as SearchResult's fields, or None when no watcher
    answers for these settings (the caller then searches in-process). Raises the watcher's
    VaultBrainError when it refused the request (a bad date, an empty query)."""
    if not available():
        return None
    request = {
        "v": PROTOCOL,
        "op": "search",
        "fingerprint": fingerprint(settings),
        "query": query,
        "args": {k: args.get(k) for k in SEARCH_ARGS},
    }
    for path in socket_paths(settings):
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


def _exchange(path: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    try:
        if not path.exists():
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
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


def listen(brain: Brain) -> Callable[[], None]:
    """Answer CLI searches for `brain`'s vault on a local socket, from a daemon thread,
    until the returned function is called. Does nothing (and says why in the log) when
    another process answers already or no socket can be made."""
    if not available():
        return lambda: None
    fp = fingerprint(brain.settings)
    paths = socket_paths(brain.settings)
    for path in paths:
        server = _bind(path)
        if server is not None:
            return _start(server, path, brain, fp)
    if not paths:
        log.event("warm_socket_unavailable", error="no socket path short enough")
    return lambda: None


def _start(server: socket.socket, path: Path, brain: Brain, fp: str) -> Callable[[], None]:
    stop = threading.Event()
    thread = threading.Thread(
        target=_serve, args=(server, brain, fp, stop), name="vault-brain-warm", daemon=True
    )
    thread.start()
    log.event("warm_socket", path=str(path))
    inode = os.stat(path).st_ino

    def close() -> None:
        stop.set()
        try:
            try:
                server.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (Linux)
            except OSError:
                pass
            server.close()
        finally:
            try:  # only our own socket: a successor may have bound the name since
                if os.stat(path).st_ino == inode:
                    path.unlink()
            except OSError:
                pass

    return close


def _bind(path: Path) -> socket.socket | None:
    """A listening socket at `path`, or None when another live process listens there or the
    folder cannot hold one. A socket file nobody answers on (a killed watcher's) is
    replaced."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists():
            if _answers(path):
                log.event("warm_socket_taken", path=str(path))
                return None
            path.unlink()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
    except OSError as exc:
        log.event("warm_socket_unavailable", path=str(path), error=str(exc)[:200])
        return None
    return server


def _answers(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            probe.connect(str(path))
        return True
    except OSError:
        return False


def _serve(server: socket.socket, brain: Brain, fp: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except OSError:
            return  # closed
        threading.Thread(
            target=_answer, args=(conn, brain, fp), name="vault-brain-warm-call", daemon=True
        ).start()


def _answer(conn: socket.socket, brain: Brain, fp: str) -> None:
    with conn:
        try:
            conn.settimeout(ANSWER_WAIT_SECONDS)
            line = _read_line(conn)
            reply = _reply(brain, fp, line)
            conn.sendall(json.dumps(reply, ensure_ascii=False, default=str).encode() + b"\n")
        except OSError:
            return  # the CLI went away; it searches in-process


def _reply(brain: Brain, fp: str, line: bytes | None) -> dict[str, Any]:
    try:
        request = json.loads(line) if line is not None else None
    except ValueError:
        request = None
    if not isinstance(request, dict) or request.get("v") != PROTOCOL:
        return {"ok": False, "error": {"code": "PROTOCOL", "message": "not understood"}}
    if request.get("fingerprint") != fp:
        return {"ok": False, "error": {"code": "SETTINGS", "message": "other settings"}}
    if request.get("op") != "search":
        return {"ok": False, "error": {"code": "PROTOCOL", "message": "unknown op"}}
    args = {k: v for k, v in (request.get("args") or {}).items() if k in SEARCH_ARGS}
    args["tags"] = tuple(args.get("tags") or ())
    try:
        result = brain.search(str(request.get("query", "")), **args)
    except VaultBrainError as exc:
        return {"ok": False, "refused": True, "error": exc.to_dict()}
    except Exception as exc:  # noqa: BLE001 - the CLI searches in-process and shows it
        log.warn("warm_search_failed", error=type(exc).__name__)
        return {"ok": False, "error": {"code": "INTERNAL", "message": type(exc).__name__}}
    log.event("warm_search", hits=len(result.hits))
    from vault_brain.records import plain

    return {"ok": True, "result": plain(result)}
