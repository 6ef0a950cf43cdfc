"""A seeded storm of file operations, the way people and tools really touch a vault.

Creates, edits, editor atomic saves (temp file renamed over), renames, moves across
folders, folder renames and deletes, touches without change, and files in ignored folders
and of other kinds. Used by the watcher tests and the latency benchmark.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import Counter
from pathlib import Path

WORDS = (
    "alpha beta gamma delta kernel socket buffer thread mutex lambda vector index token "
    "release checklist garden river mountain orange violet quartz harbor lantern meadow "
    "cipher falcon pepper saffron tundra willow zephyr ember glacier nimbus"
).split()
FOLDERS = ("", "Projects", "Projects/Alpha", "Daily", "Areas/Health", "Archive/2024")
IGNORED = (".obsidian", ".trash", ".git", ".vault-brain-not", "Daily/.hidden")
OPS = (
    ("create", 14),
    ("modify", 14),
    ("atomic_save", 12),
    ("rename", 8),
    ("move", 8),
    ("folder_rename", 3),
    ("folder_delete", 1),
    ("delete", 6),
    ("touch", 6),
    ("ignored", 6),
    ("other_kind", 4),
    ("create_then_modify", 6),
)


class Storm:
    """Random operations on a vault; `run(n)` returns how many of each kind it did."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.serial = 0
        self.ids = 0  # frontmatter ids are never reused: a copied id would make order matter
        self.kinds = [k for k, _ in OPS]
        self.weights = [w for _, w in OPS]

    # -- what is there now --------------------------------------------------------------

    def notes(self) -> list[Path]:
        out = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out += [Path(folder) / f for f in sorted(files) if f.endswith(".md")]
        return out

    def folders(self) -> list[Path]:
        out = []
        for folder, dirs, _ in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out += [Path(folder) / d for d in dirs]
        return out

    # -- content ------------------------------------------------------------------------

    def _name(self) -> str:
        self.serial += 1
        return f"{self.rng.choice(WORDS).title()} {self.serial}"

    def text(self, title: str) -> str:
        rng = self.rng
        lines = []
        if rng.random() < 0.4:
            self.ids += 1
            tags = ", ".join(rng.sample(WORDS, 2))
            lines += ["---", f"id: s{self.ids:06d}", f"title: {title}", f"tags: [{tags}]", "---"]
        lines.append(f"# {title}")
        for section in range(rng.randint(1, 4)):
            if section:
                lines.append(f"## {rng.choice(WORDS).title()} {section}")
            words = rng.choices(WORDS, k=rng.randint(5, 220))
            lines.append(" ".join(words))
            if rng.random() < 0.5:  # names like the notes this storm makes; some resolve
                target = f"{rng.choice(WORDS).title()} {rng.randint(1, self.serial + 1)}"
                lines.append(f"See [[{target}]] and #{rng.choice(WORDS)}.")
        return "\n\n".join(lines) + "\n"

    # -- operations ---------------------------------------------------------------------

    def run(self, count: int) -> Counter:
        done: Counter = Counter()
        for _ in range(count):
            kind = self.rng.choices(self.kinds, self.weights)[0]
            if getattr(self, "_" + kind)():
                done[kind] += 1
        return done

    def _pick_note(self) -> Path | None:
        notes = self.notes()
        return self.rng.choice(notes) if notes else None

    def _folder(self) -> Path:
        folder = self.root / self.rng.choice(FOLDERS)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _create(self) -> bool:
        name = self._name()
        (self._folder() / f"{name}.md").write_text(self.text(name), encoding="utf-8")
        return True

    def _create_then_modify(self) -> bool:
        name = self._name()
        path = self._folder() / f"{name}.md"
        with path.open("w", encoding="utf-8") as fh:
            fh.write(f"# {name}\n")
            fh.flush()
            fh.write(self.text(name))
        return True

    def _modify(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        with note.open("a", encoding="utf-8") as fh:
            fh.write("\n" + " ".join(self.rng.choices(WORDS, k=self.rng.randint(1, 40))) + "\n")
        return True

    def _atomic_save(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        style = self.rng.randrange(3)
        temp = {
            0: note.with_name(f".{note.name}.swp"),  # vim-like hidden temp
            1: note.with_name(f"{note.name}.tmp{self.serial}"),  # VS Code / atomicwrites-like
            2: note.with_name(f"{note.stem}~.md.partial"),
        }[style]
        temp.write_text(self.text(note.stem), encoding="utf-8")
        os.replace(temp, note)
        return True

    def _rename(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        note.rename(note.with_name(f"{self._name()}.md"))
        return True

    def _move(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        target = self._folder() / note.name
        if target.exists():
            return False
        note.rename(target)
        return True

    def _folder_rename(self) -> bool:
        folders = self.folders()
        if not folders:
            return False
        folder = self.rng.choice(folders)
        folder.rename(folder.with_name(f"{folder.name} {self.serial}"))
        self.serial += 1
        return True

    def _folder_delete(self) -> bool:
        folders = [f for f in self.folders() if f.parent == self.root]
        if not folders:
            return False
        shutil.rmtree(self.rng.choice(folders))
        return True

    def _delete(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        note.unlink()
        return True

    def _touch(self) -> bool:
        note = self._pick_note()
        if note is None:
            return False
        os.utime(note)
        return True

    def _ignored(self) -> bool:
        folder = self.root / self.rng.choice(IGNORED)
        folder.mkdir(parents=True, exist_ok=True)
        name = self._name()
        (folder / f"{name}.md").write_text(self.text(name), encoding="utf-8")
        return True

    def _other_kind(self) -> bool:
        name = self._name()
        suffix = self.rng.choice((".txt", ".png", ".canvas", ".md.bak"))
        (self._folder() / f"{name}{suffix}").write_bytes(os.urandom(64))
        return True
