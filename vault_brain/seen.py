"""The versions of each note this process gave its callers and the last one it wrote: what
a CONFLICT needs to say what actually differs (the caller's own earlier update, a version
no read ever gave out, or someone else's edit), instead of one message for all three.

In memory and bounded (the most recent notes, a few versions each): a process that starts
again knows none, and then the note's kept history still tells a real version apart.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, deque

NOTES_MAX = 10_000
VERSIONS_PER_NOTE = 16
# Every version vault-brain gives out: 12 hex characters (vault/note.py, file_version).
VERSION = re.compile(r"[0-9a-f]{12}")


class SeenVersions:
    def __init__(self, notes: int = NOTES_MAX, per_note: int = VERSIONS_PER_NOTE) -> None:
        self._notes = notes
        self._per_note = per_note
        self._gave: OrderedDict[str, deque[str]] = OrderedDict()
        self._wrote: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def gave(self, note_id: str, version: str) -> None:
        """A caller was given this version of the note (a read, or a write's reply)."""
        with self._lock:
            versions = self._gave.pop(note_id, None) or deque(maxlen=self._per_note)
            if version not in versions:
                versions.append(version)
            self._gave[note_id] = versions
            while len(self._gave) > self._notes:
                self._gave.popitem(last=False)

    def wrote(self, note_id: str, version: str) -> None:
        """This process's write made the note this version."""
        self.gave(note_id, version)
        with self._lock:
            self._wrote.pop(note_id, None)
            self._wrote[note_id] = version
            while len(self._wrote) > self._notes:
                self._wrote.popitem(last=False)

    def given(self, note_id: str, version: str) -> bool:
        with self._lock:
            return version in self._gave.get(note_id, ())

    def last_written(self, note_id: str) -> str | None:
        with self._lock:
            return self._wrote.get(note_id)
