"""Invariant 2: no user's words are ever lost. Atomic writes, versioned replace, trash."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.waiting import wait_until
from vault_brain.errors import Conflict, Forbidden, InvalidInput, NotFound
from vault_brain.vault.note import file_version
from vault_brain.vault.paths import name_key, normalize_ref
from vault_brain.vault.writer import (
    _taken_keys,
    clean_stale_temps,
    create_note_file,
    replace_note_file,
    trash_note_file,
)

OLD = b"# Alpha\n\nThe person's words.\n"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (root / "Projects" / "Alpha.md").write_bytes(OLD)
    return root


def all_files(root: Path) -> list[str]:
    """The vault's files, leaving out vault-brain's own folder (locks, history)."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.is_dir() and ".vault-brain" not in p.relative_to(root).parts
    )


# --- failures while replacing: the original stays, no temp file is left ------------------


def replace_alpha(vault: Path, data: bytes) -> str:
    return replace_note_file(vault, "Projects/Alpha.md", file_version(OLD), data)


def test_failed_fsync_keeps_the_original_and_removes_the_temp(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError("I/O error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        replace_alpha(vault, b"never synced")
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_data_that_is_not_bytes_is_refused_before_anything_is_written(vault: Path) -> None:
    with pytest.raises(InvalidInput):
        replace_alpha(vault, "text, not bytes")  # type: ignore[arg-type]
    assert all_files(vault) == ["Projects/Alpha.md"]
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD


def test_a_replace_keeps_the_original_permission_bits(vault: Path) -> None:
    path = vault / "Projects" / "Alpha.md"
    os.chmod(path, 0o640)
    replace_alpha(vault, b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_new_files_get_ordinary_permissions_not_private_temp_ones(vault: Path) -> None:
    rel = create_note_file(vault, None, "Fresh", b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((vault / rel).stat().st_mode) == 0o666 & ~umask


# --- create_note_file ----------------------------------------------------------------------


def test_create_writes_the_bytes_under_the_title(vault: Path) -> None:
    rel = create_note_file(vault, "Projects", "Beta plan", b"beta")
    assert rel == "Projects/Beta plan.md"
    assert (vault / rel).read_bytes() == b"beta"


def test_create_in_the_vault_root(vault: Path) -> None:
    assert create_note_file(vault, "", "Root note", b"r") == "Root note.md"


def test_create_makes_missing_folders(vault: Path) -> None:
    rel = create_note_file(vault, "Areas/Health", "Sleep", b"zzz")
    assert rel == "Areas/Health/Sleep.md"
    assert (vault / rel).read_bytes() == b"zzz"


def test_name_clash_gets_a_number_and_the_existing_note_is_untouched(vault: Path) -> None:
    first = create_note_file(vault, "Projects", "Alpha", b"second alpha")
    second = create_note_file(vault, "Projects", "Alpha", b"third alpha")
    assert (first, second) == ("Projects/Alpha 2.md", "Projects/Alpha 3.md")
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD
    assert (vault / first).read_bytes() == b"second alpha"


def test_create_leaves_no_temp_files(vault: Path) -> None:
    create_note_file(vault, "Projects", "Alpha", b"x")
    assert all_files(vault) == ["Projects/Alpha 2.md", "Projects/Alpha.md"]


def test_title_is_made_file_name_safe(vault: Path) -> None:
    assert create_note_file(vault, "", "Q3: plans/ideas?", b"x") == "Q3 plans-ideas.md"


def test_concurrent_creates_with_one_title_never_overwrite(vault: Path) -> None:
    results: list[str] = []

    def save(i: int) -> None:
        results.append(create_note_file(vault, "Race", "Same", f"note {i}".encode()))

    threads = [threading.Thread(target=save, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 20
    contents = {(vault / rel).read_bytes() for rel in results}
    assert contents == {f"note {i}".encode() for i in range(20)}


def test_create_into_a_symlink_leading_outside_writes_nothing_anywhere(
    vault: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (vault / "escape").symlink_to(outside, target_is_directory=True)
    before = all_files(vault)
    with pytest.raises(Forbidden):
        create_note_file(vault, "escape/deeper", "Leak", b"secret")
    assert list(outside.iterdir()) == []
    assert all_files(vault) == before


@pytest.mark.parametrize("folder", ["../outside", ".trash", ".obsidian", ".vault-brain", "/tmp"])
def test_create_in_a_forbidden_folder_writes_nothing(
    vault: Path, tmp_path: Path, folder: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(Forbidden):
        create_note_file(vault, folder, "Leak", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_create_outside_allowed_folders_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        create_note_file(vault, "Projects", "Beta", b"x", allowed_folders=["Inbox"])
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_create_where_a_file_blocks_the_folder_is_invalid(vault: Path) -> None:
    (vault / "Blocked").write_text("a file")
    with pytest.raises(InvalidInput):
        create_note_file(vault, "Blocked", "Note", b"x")


# --- replace_note_file ---------------------------------------------------------------------


def test_replace_with_the_current_version_writes_and_returns_the_new_version(vault: Path) -> None:
    new = replace_note_file(vault, "Projects/Alpha.md", file_version(OLD), b"updated")
    assert (vault / "Projects" / "Alpha.md").read_bytes() == b"updated"
    assert new == file_version(b"updated")


def test_stale_version_is_refused_and_file_untouched(vault: Path) -> None:
    path = vault / "Projects" / "Alpha.md"
    path.write_bytes(b"edited in Obsidian")
    with pytest.raises(Conflict) as info:
        replace_note_file(vault, "Projects/Alpha.md", file_version(OLD), b"model's version")
    assert path.read_bytes() == b"edited in Obsidian"
    assert info.value.details["current_version"] == file_version(b"edited in Obsidian")
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_replace_of_a_missing_note_is_not_found(vault: Path) -> None:
    with pytest.raises(NotFound):
        replace_note_file(vault, "Projects/Ghost.md", "000000000000", b"x")
    assert not (vault / "Projects" / "Ghost.md").exists()


def test_replace_through_a_traversal_path_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        replace_note_file(vault, "../vault/Projects/Alpha.md", file_version(OLD), b"x")
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD


def test_replace_outside_allowed_folders_is_forbidden(vault: Path) -> None:
    with pytest.raises(Forbidden):
        replace_note_file(
            vault, "Projects/Alpha.md", file_version(OLD), b"x", allowed_folders=["Inbox"]
        )
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD


def test_racing_replaces_with_one_version_have_exactly_one_winner(vault: Path) -> None:
    version = file_version(OLD)
    barrier = threading.Barrier(20)
    outcomes: dict[int, str] = {}

    def update(i: int) -> None:
        barrier.wait()
        try:
            replace_note_file(vault, "Projects/Alpha.md", version, f"writer {i}".encode())
            outcomes[i] = "won"
        except Conflict:
            outcomes[i] = "conflict"

    threads = [threading.Thread(target=update, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 20
    assert len(winners) == 1
    assert (vault / "Projects" / "Alpha.md").read_bytes() == f"writer {winners[0]}".encode()
    assert all_files(vault) == ["Projects/Alpha.md"]


# --- trash_note_file -----------------------------------------------------------------------


def test_trash_moves_the_note_keeping_its_relative_path(vault: Path) -> None:
    trashed = trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert trashed == ".trash/Projects/Alpha.md"
    assert (vault / trashed).read_bytes() == OLD
    assert not (vault / "Projects" / "Alpha.md").exists()


def test_trashing_a_name_already_in_the_trash_gets_a_unique_name(vault: Path) -> None:
    (vault / ".trash" / "Projects").mkdir(parents=True)
    (vault / ".trash" / "Projects" / "Alpha.md").write_bytes(b"older alpha")
    trashed = trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert trashed == ".trash/Projects/Alpha 2.md"
    assert (vault / ".trash" / "Projects" / "Alpha.md").read_bytes() == b"older alpha"
    assert (vault / trashed).read_bytes() == OLD


def test_trash_keeps_the_same_file_not_a_copy(vault: Path) -> None:
    inode = (vault / "Projects" / "Alpha.md").stat().st_ino
    trashed = trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert (vault / trashed).stat().st_ino == inode


def test_trash_with_a_stale_version_is_refused_and_file_untouched(vault: Path) -> None:
    path = vault / "Projects" / "Alpha.md"
    path.write_bytes(b"edited")
    with pytest.raises(Conflict) as info:
        trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert path.read_bytes() == b"edited"
    assert info.value.details["current_version"] == file_version(b"edited")
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_trash_of_a_missing_note_is_not_found(vault: Path) -> None:
    with pytest.raises(NotFound):
        trash_note_file(vault, "Projects/Ghost.md", "000000000000")
    assert all_files(vault) == ["Projects/Alpha.md"]


def test_trash_cannot_target_the_trash_itself(vault: Path) -> None:
    (vault / ".trash").mkdir()
    (vault / ".trash" / "Old.md").write_bytes(b"old")
    with pytest.raises(Forbidden):
        trash_note_file(vault, ".trash/Old.md", file_version(b"old"))
    assert (vault / ".trash" / "Old.md").read_bytes() == b"old"


def test_trash_folder_symlinked_outside_the_vault_is_forbidden(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (vault / ".trash").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Forbidden):
        trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD
    assert list(outside.iterdir()) == []


def test_trash_names_never_collide_with_earlier_trashed_files(vault: Path) -> None:
    (vault / "Projects" / "Alpha 2.md").write_bytes(b"two")
    (vault / ".trash" / "Projects").mkdir(parents=True)
    (vault / ".trash" / "Projects" / "Alpha.md").write_bytes(b"older")
    first = trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    second = trash_note_file(vault, "Projects/Alpha 2.md", file_version(b"two"))
    assert first != second
    assert (vault / first).read_bytes() == OLD
    assert (vault / second).read_bytes() == b"two"
    assert (vault / ".trash" / "Projects" / "Alpha.md").read_bytes() == b"older"


def test_stale_trash_creates_no_trash_folders(vault: Path) -> None:
    (vault / "Projects" / "Alpha.md").write_bytes(b"edited")
    with pytest.raises(Conflict):
        trash_note_file(vault, "Projects/Alpha.md", file_version(OLD))
    assert not (vault / ".trash").exists()


def create_a_second_alpha(vault: Path) -> str:
    """Save "Alpha" beside the existing one: it gets "Alpha 2", whole, and nothing else moves."""
    rel = create_note_file(vault, "Projects", "Alpha", b"new alpha")
    assert rel == "Projects/Alpha 2.md"
    assert (vault / rel).read_bytes() == b"new alpha"
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD
    assert all_files(vault) == ["Projects/Alpha 2.md", "Projects/Alpha.md"]
    return rel


def test_create_without_hard_links_still_never_overwrites(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "hard links not supported here")

    monkeypatch.setattr(os, "link", no_links)
    create_a_second_alpha(vault)


# --- names that differ only in spelling (issue 11, item 24) -------------------------------


def test_a_same_title_save_beside_a_decomposed_name_gets_a_number(vault: Path) -> None:
    nfd = unicodedata.normalize("NFD", "Café.md")  # how macOS writes it
    (vault / "Projects" / nfd).write_bytes(b"the person's cafe note")
    rel = create_note_file(vault, "Projects", "Café", b"the model's note")
    assert rel == "Projects/Café 2.md"
    assert (vault / "Projects" / nfd).read_bytes() == b"the person's cafe note"
    names = {unicodedata.normalize("NFC", n) for n in os.listdir(vault / "Projects")}
    assert names == {"Alpha.md", "Café.md", "Café 2.md"}


@pytest.mark.parametrize(
    "existing",
    ["alpha beta.md", "ALPHA BETA.MD", " Alpha Beta.md", "\\Alpha Beta.md", "Alpha Beta.md "],
)
def test_a_name_taken_in_any_spelling_blocks_among_many_others(vault: Path, existing: str) -> None:
    """Only names that start like the title are keyed in full (speed); the spellings
    name_key folds together still block, in a folder of many unrelated notes."""
    folder = vault / "Projects"
    for i in range(300):
        (folder / f"Unrelated {i}.md").write_bytes(b"x")
    (folder / unicodedata.normalize("NFD", "Zoë Alpha Beta.md")).write_bytes(b"x")
    (folder / existing).write_bytes(b"the person's note")
    assert name_key(existing) == name_key("Alpha Beta.md")
    assert create_note_file(vault, "Projects", "Alpha Beta", b"new") == "Projects/Alpha Beta 2.md"
    assert (folder / existing).read_bytes() == b"the person's note"
    assert create_note_file(vault, "Projects", "Zoë Alpha Beta", b"z") == (
        "Projects/Zoë Alpha Beta 2.md"
    )


@pytest.mark.parametrize("existing", ["alpha beta.md", "ALPHA BETA.MD", " Alpha Beta.md"])
def test_a_name_taken_in_another_case_blocks_in_a_plain_ascii_folder(
    vault: Path, existing: str
) -> None:
    """An all-ASCII folder takes the one-pass search of the lowered listing."""
    folder = vault / "Projects"
    for i in range(300):
        (folder / f"Unrelated {i}.md").write_bytes(b"x")
    (folder / existing).write_bytes(b"the person's note")
    assert create_note_file(vault, "Projects", "Alpha Beta", b"new") == "Projects/Alpha Beta 2.md"
    assert (folder / existing).read_bytes() == b"the person's note"


# Plain ASCII (the one-pass search), and the spellings name_key folds (the full keying).
_ASCII_NAMES = st.sets(st.text("aAbB zZ-.", min_size=1, max_size=8), max_size=12)
_ANY_NAMES = st.sets(st.text("aAbB zZ-.\\éÉßİ\u0301ﬁ", min_size=1, max_size=8), max_size=12)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.one_of(_ASCII_NAMES, _ANY_NAMES),
    stem=st.text("aAbBzZ ß", min_size=1, max_size=3),
)
def test_taken_keys_are_every_name_key_that_starts_like_the_title(
    tmp_path: Path, names: set[str], stem: str
) -> None:
    """Whatever the folder holds, the keys found are exactly those of the definition: every
    name keyed in full, kept when it starts with the title's key."""
    folder = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name in names - {".", ".."}:
        try:
            (folder / name).write_bytes(b"x")
        except OSError:  # a spelling this file system folds into one already made
            continue
    prefix = name_key(stem)
    expected = {name_key(n) for n in os.listdir(folder) if name_key(n).startswith(prefix)}
    assert _taken_keys(folder, stem) == expected


def test_a_same_title_save_beside_another_case_gets_a_number(vault: Path) -> None:
    assert create_note_file(vault, "Projects", "ALPHA", b"x") == "Projects/ALPHA 2.md"
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (unicodedata.normalize("NFD", "Notizen/Übersicht.md"), "Notizen/Übersicht.md"),
        ("./Inbox.md", "Inbox.md"),
        ("\\Folder\\Note.md", "Folder/Note.md"),
        ("  Note.md ", "Note.md"),
    ],
)
def test_normalize_ref_gives_one_spelling_for_lookups(ref: str, expected: str) -> None:
    assert normalize_ref(ref) == expected
    assert name_key(ref) == expected.casefold()


# --- temp files left by a killed save (item 8) -------------------------------------------


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_stale_temp_files_of_ours_are_removed_and_nothing_else(vault: Path, tmp_path: Path) -> None:
    stale = [vault / ".vb-abc_1234.tmp", vault / "Projects" / ".vb-zz99yy88.tmp"]
    fresh = vault / "Projects" / ".vb-fresh001.tmp"
    not_ours = [
        vault / "Projects" / ".vb-notes.tmp",  # not mkstemp's shape
        vault / "Projects" / "vb-abcdefgh.tmp",
        vault / "Projects" / ".vb-abcdefgh.md",
        vault / ".obsidian" / ".vb-abcdefgh.tmp",  # a dot-folder: never ours
    ]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (vault / "linked").symlink_to(outside, target_is_directory=True)
    not_ours.append(outside / ".vb-abcdefgh.tmp")
    for path in [*stale, fresh, *not_ours]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"full note text")
        if path is not fresh:
            _age(path, 3600)
    assert clean_stale_temps(vault) == 2
    assert not any(p.exists() for p in stale)
    assert fresh.exists() and all(p.exists() for p in not_ours)
    assert (vault / "Projects" / "Alpha.md").read_bytes() == OLD


def _kill_savers(vault: Path, prelude: str = "", times: int = 8) -> None:
    """kill -9, `times` over, a process that saves 4 MB notes into Saves/ as fast as it can,
    each time once it has saved one (whatever the machine's speed) and a moment later."""
    script = (
        "import sys\n"
        f"{prelude}"
        "from pathlib import Path\n"
        "from vault_brain.vault.writer import create_note_file\n"
        "data = b'x' * 4_000_000\n"
        "while True:\n"
        "    create_note_file(Path(sys.argv[1]), 'Saves', 'Long', data)\n"
        "    print('saved', flush=True)\n"
    )
    for i in range(times):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(vault)], stdout=subprocess.PIPE, cwd=REPO
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"saved\n"
        time.sleep(0.01 * i)  # not a wait for anything: where in the next save the kill lands
        proc.kill()
        proc.wait()


def test_saves_killed_mid_write_leave_temps_that_the_cleanup_removes(vault: Path) -> None:
    """kill -9 a process that is saving long notes, again and again, where a folder cannot
    hold a nameless file (a named temp file then); every leftover temp file is ours and
    goes, and every note that landed is whole."""
    _kill_savers(vault, prelude="import os\nif hasattr(os, 'O_TMPFILE'): del os.O_TMPFILE\n")
    temps = [p for p in (vault / "Saves").iterdir() if p.name.startswith(".vb-")]
    for path in temps:
        _age(path, 3600)
    removed = clean_stale_temps(vault)
    print(f"\n{len(temps)} temp files left by 8 kill -9, {removed} removed")
    assert removed == len(temps)
    assert [p for p in (vault / "Saves").iterdir() if p.name.startswith(".")] == []
    assert all(p.stat().st_size == 4_000_000 for p in (vault / "Saves").iterdir())


def _anonymous_files() -> bool:
    """Linux's O_TMPFILE works in this temp folder (and /proc links it to a name)."""
    import tempfile

    if not hasattr(os, "O_TMPFILE") or not os.path.isdir("/proc/self/fd"):
        return False
    with tempfile.TemporaryDirectory() as folder:
        try:
            os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600))
        except OSError:
            return False
    return True


ANONYMOUS = pytest.mark.skipif(not _anonymous_files(), reason="needs Linux O_TMPFILE and /proc")


@ANONYMOUS
def test_a_new_note_shows_no_other_name_to_a_watcher(vault: Path) -> None:
    """The bytes are written and synced in a file with no name, then linked under the
    note's: Obsidian and our watcher see one new file, never a temp file come and go."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    seen: list[str] = []

    class Names(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            seen.append(os.path.basename(os.fsdecode(event.src_path)))
            if getattr(event, "dest_path", ""):
                seen.append(os.path.basename(os.fsdecode(event.dest_path)))

    observer = Observer()
    observer.schedule(Names(), str(vault / "Projects"), recursive=True)
    observer.start()  # the inotify watches are in place when it returns
    try:
        for i in range(5):
            create_note_file(vault, "Projects", "Beta", b"beta %d" % i)
        # Events come in order: once a file made after the saves is seen, so is every event
        # of the saves (the last note's close comes after its create).
        (vault / "Projects" / "zz-after-the-saves").write_bytes(b"")
        wait_until(lambda: "zz-after-the-saves" in seen, "the events of the saves")
    finally:
        observer.stop()
        observer.join()
    named = {n for n in seen if n and not n.startswith("#")}  # "#<inode>": the nameless file
    named.discard("zz-after-the-saves")
    assert named <= {"Projects", "Beta.md", "Beta 2.md", "Beta 3.md", "Beta 4.md", "Beta 5.md"}
    assert "Beta 5.md" in named
    assert (vault / "Projects" / "Beta 5.md").read_bytes() == b"beta 4"


@ANONYMOUS
def test_saves_killed_mid_write_leave_nothing_behind(vault: Path) -> None:
    """kill -9 a process that is saving long notes: a nameless file vanishes with it, so
    no temp file is left for the cleanup, and every note that landed is whole."""
    _kill_savers(vault)
    names = [p.name for p in (vault / "Saves").iterdir()]
    assert names and not [n for n in names if n.startswith(".")]
    assert all(p.stat().st_size == 4_000_000 for p in (vault / "Saves").iterdir())


def test_create_where_nameless_files_are_refused_still_writes_whole_and_never_overwrites(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without O_TMPFILE (macOS, some network shares): the named temp file."""
    real_open = os.open

    def no_nameless(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & getattr(os, "O_TMPFILE", 0) == getattr(os, "O_TMPFILE", -1):
            raise OSError(errno.EOPNOTSUPP, "O_TMPFILE not supported here")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", no_nameless)
    rel = create_a_second_alpha(vault)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((vault / rel).stat().st_mode) == 0o666 & ~umask


def test_a_note_that_links_to_a_file_that_is_not_markdown_is_never_written(vault: Path) -> None:
    key = vault / "Projects" / "deploy.pem"
    key.write_bytes(b"secret key")
    (vault / "Projects" / "Deploy.md").symlink_to(key)
    with pytest.raises(Forbidden):
        replace_note_file(vault, "Projects/Deploy.md", file_version(b"secret key"), b"note")
    with pytest.raises(Forbidden):
        trash_note_file(vault, "Projects/Deploy.md", file_version(b"secret key"))
    assert key.read_bytes() == b"secret key"
