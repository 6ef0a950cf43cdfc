"""Files a model builds when it loads (the e5 graph), kept so the next process reads them
instead of building them again: disposable, written atomically, and kept in the user's own
cache folder, never in the vault.

Not in the vault, because a vault is shared: synced by iCloud, Dropbox, Syncthing or git, or
written by its co-owners. A graph there could be replaced by anyone the folder is shared
with (a constant-output graph made every note score 1.0; a slow one stalled every search), so
what runs as the model must live where only this user writes. A folder that cannot take the
files costs only time."""

from __future__ import annotations

import os
from pathlib import Path

from vault_brain.log import event


class ModelCache:
    """Built model files in one folder (embed.cache_dir: the user's cache by default)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @classmethod
    def under(cls, cache_dir: str) -> ModelCache | None:
        """The models folder of embed.cache_dir (which load_settings always fills in)."""
        return cls(Path(cache_dir).expanduser() / "models") if cache_dir else None

    def find(self, name: str) -> Path | None:
        """The kept file `name`, or None."""
        path = self.folder / name
        return path if path.is_file() else None

    def keep(self, name: str, data: bytes | memoryview, *, replaces: str = "") -> None:
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

    def drop(self, name: str) -> None:
        """Remove a kept file that proved wrong (damaged, or replaced by someone)."""
        try:
            (self.folder / name).unlink(missing_ok=True)
        except OSError as exc:
            event("artifact_not_dropped", file=name, error=str(exc)[:200])
