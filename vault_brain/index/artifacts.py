"""Derived files kept between processes, disposable like the index: what a model builds
when it loads (the e5 graph), so that the next process reads it instead of building it
again. Written atomically; a folder that cannot take them costs only time. Where they go is
`Settings.artifacts_path` (today beside a SQLite index file); no index backend holds them."""

from __future__ import annotations

import os
from pathlib import Path

from vault_brain.log import event


class Artifacts:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find(self, name: str) -> Path | None:
        """The kept file `name`, or None."""
        path = self.folder / name
        return path if path.is_file() else None

    def keep(self, name: str, data: bytes, *, replaces: str = "") -> None:
        """Write `name` (temp file, then rename) and remove the older files it replaces
        (a glob, e.g. "e5-graph-*.onnx")."""
        path = self.folder / name
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            for old in self.folder.glob(replaces) if replaces else ():
                if old != path:
                    old.unlink(missing_ok=True)
        except OSError as exc:
            event("artifact_not_kept", file=name, folder=str(self.folder), error=str(exc)[:200])
