"""Where the index lives (issue 25 item 7): out of the vault people sync, in the vault's own
folder of the user's cache; `index.url` still puts it anywhere; an index an earlier version
kept in the vault is moved out, not lost. Through the CLI process, on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import filelock

NOTES = {
    "Deploy.md": "# Deploy\n\nPromote the canary, then the fleet.\n",
    "Tea.md": "---\nid: tea00001\n---\n# Tea\n\nSteep at 80 degrees. See [[Deploy]].\n",
}


def make_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    for rel, text in NOTES.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def run(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full = {**base, "XDG_CACHE_HOME": str(cache), "VAULT_BRAIN_EMBED_PROVIDER": "none"}
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=120,
    )


def status(vault: Path, cache: Path, env: dict[str, str] | None = None) -> dict:
    r = run("status", "--vault", str(vault), "--json", cache=cache, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def files_in(vault: Path) -> set[str]:
    return {p.relative_to(vault).as_posix() for p in vault.rglob("*") if p.is_file()}


def test_an_indexed_and_searched_vault_holds_no_index_file(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    for args in (("index",), ("search", "canary"), ("get", "Tea"), ("status",)):
        r = run(*args, "--vault", str(vault), cache=cache)
        assert r.returncode == 0, r.stderr
    assert files_in(vault) == set(NOTES)  # not even an empty .vault-brain folder's files
    where = Path(status(vault, cache)["index_path"])
    assert where.is_file() and cache in where.parents
    assert (where.parent / "indexer.lock").exists()  # the lock sits beside it, outside too
    assert (where.parent / "vault.txt").read_text(encoding="utf-8") == f"{vault.resolve()}\n"


def test_two_vaults_get_two_indexes_even_with_one_name(tmp_path):
    cache = tmp_path / "cache"
    one, two = make_vault(tmp_path / "a" / "Notes"), make_vault(tmp_path / "b" / "Notes")
    (two / "Only here.md").write_text("# Only here\n\nkumquat\n", encoding="utf-8")
    for vault in (one, two):
        assert run("index", "--vault", str(vault), cache=cache).returncode == 0
    first, second = status(one, cache), status(two, cache)
    assert first["index_path"] != second["index_path"]
    assert (first["notes"], second["notes"]) == (2, 3)
    folders = sorted(p.name for p in (cache / "vault-brain" / "indexes").iterdir())
    assert len(folders) == 2 and all(f.startswith("Notes-") for f in folders)


def test_index_url_puts_the_index_where_it_says(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    where = tmp_path / "fast-disk" / "notes.db"
    env = {"VAULT_BRAIN_INDEX_URL": str(where)}
    assert run("index", "--vault", str(vault), cache=cache, env=env).returncode == 0
    assert status(vault, cache, env)["index_path"] == str(where) and where.is_file()
    assert not (cache / "vault-brain" / "indexes").exists()
    assert files_in(vault) == set(NOTES)
    # ... and so does the user's own config file
    home = tmp_path / "home"
    (home / ".config" / "vault-brain").mkdir(parents=True)
    other = tmp_path / "other" / "idx.db"
    (home / ".config" / "vault-brain" / "config.toml").write_text(f'[index]\nurl = "{other}"\n')
    mine = {"HOME": str(home), "XDG_CONFIG_HOME": ""}
    assert status(vault, cache, mine)["index_path"] == str(other)


def test_status_says_where_the_index_is(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    assert run("index", "--vault", str(vault), cache=cache).returncode == 0
    where = status(vault, cache)["index_path"]
    r = run("status", "--vault", str(vault), cache=cache)
    assert r.returncode == 0, r.stderr
    assert where in r.stdout


def test_an_index_kept_in_the_vault_by_an_earlier_version_is_moved_out(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    old = vault / ".vault-brain" / "index.db"
    before = {"VAULT_BRAIN_INDEX_PATH": str(old)}  # where earlier versions kept it
    assert run("index", "--vault", str(vault), cache=cache, env=before).returncode == 0
    inode = old.stat().st_ino
    now = status(vault, cache)  # the default place: the old file is moved there
    moved = Path(now["index_path"])
    assert moved.stat().st_ino == inode  # the same file, vectors and all, not a rebuild
    assert now["notes"] == 2
    assert not list((vault / ".vault-brain").iterdir())  # index, WAL and lock all gone


def test_an_index_in_the_vault_that_another_process_indexes_is_left_alone(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    old = vault / ".vault-brain" / "index.db"
    before = {"VAULT_BRAIN_INDEX_PATH": str(old)}
    assert run("index", "--vault", str(vault), cache=cache, env=before).returncode == 0
    lock = filelock.FileLock(str(old.parent / "indexer.lock"), blocking=False)
    with lock:  # an older vault-brain still serving this vault
        assert run("index", "--vault", str(vault), cache=cache).returncode == 0
        now = status(vault, cache)
    assert old.is_file() and Path(now["index_path"]) != old  # a new index, built anew
    assert now["notes"] == 2


def test_a_symlink_where_the_old_index_was_is_never_moved(tmp_path):
    vault, cache = make_vault(tmp_path / "vault"), tmp_path / "cache"
    target = tmp_path / "outside.db"
    target.write_bytes(b"")
    (vault / ".vault-brain").mkdir()
    (vault / ".vault-brain" / "index.db").symlink_to(target)
    where = Path(status(vault, cache)["index_path"])
    assert not where.is_symlink() and where.is_file()
    assert (vault / ".vault-brain" / "index.db").is_symlink() and target.read_bytes() == b""
