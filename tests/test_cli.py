"""The CLI end to end, as a user runs it: a real subprocess, real files, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.waiting import HANG_SECONDS

REPO = Path(__file__).resolve().parents[1]


def run(
    *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
    )


def index_of(vault: Path) -> Path:
    """The index file of a vault, as `status --json` names it."""
    r = run("status", "--vault", str(vault), "--json", env={"VAULT_BRAIN_EMBED_PROVIDER": "none"})
    assert r.returncode == 0, r.stderr
    return Path(json.loads(r.stdout)["index_path"])


@pytest.fixture
def small_vault(vault):
    vault.write(
        "How-to/Deploy.md", "# Deploy to production\n\nRun the pipeline and promote the canary.\n"
    )
    vault.write(
        "Notes/Tea.md",
        "---\nid: tea00001\ntags: [drinks]\n---\n"
        "# Green tea\n\nSteep at 80 degrees. See [[Deploy]].\n",
    )
    return vault


def test_index_then_search_json(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    r = run("index", "--vault", str(small_vault.root), "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["added"] == 2
    r = run("search", "how do I deploy", "--vault", str(small_vault.root), "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == "hybrid" and out["degraded"] is True
    first = out["results"][0]
    assert set(first) == {
        "id",
        "title",
        "path",
        "summary",
        "snippet",
        "score",
        "confidence",
        "updated",
    }
    assert first["path"] == "How-to/Deploy.md"


def test_search_without_prior_index_syncs_first(small_vault):
    r = run(
        "search",
        "green tea",
        "--vault",
        str(small_vault.root),
        "--mode",
        "fts",
        "--json",
        env={"VAULT_BRAIN_EMBED_PROVIDER": "none"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["id"] == "tea00001"


def test_search_sees_an_edit_made_after_indexing(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    run("index", "--vault", str(small_vault.root), env=env)
    small_vault.write("New.md", "# Fresh\n\nAn okapi appeared.\n")
    r = run("search", "okapi", "--vault", str(small_vault.root), "--json", env=env)
    assert json.loads(r.stdout)["results"][0]["path"] == "New.md"


@pytest.mark.slow
def test_local_embeddings_make_hybrid_not_degraded(small_vault):
    r = run("index", "--vault", str(small_vault.root), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["vectors_written"] >= 2
    r = run("search", "steeping tea temperature", "--vault", str(small_vault.root), "--json")
    out = json.loads(r.stdout)
    assert out["degraded"] is False and out["results"][0]["id"] == "tea00001"


def test_get_json_has_version_links_and_backlinks(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    run("index", "--vault", str(small_vault.root), env=env)
    r = run("get", "Notes/Tea.md", "--vault", str(small_vault.root), "--json", env=env)
    assert r.returncode == 0, r.stderr
    note = json.loads(r.stdout)
    assert note["id"] == "tea00001" and len(note["version"]) == 12
    assert note["links_out"][0]["title"] == "Deploy to production"
    r = run("get", note["links_out"][0]["id"], "--vault", str(small_vault.root), "--json", env=env)
    assert json.loads(r.stdout)["backlinks"][0]["id"] == "tea00001"


def test_get_unknown_note_exits_1(small_vault):
    r = run(
        "get", "nope", "--vault", str(small_vault.root), env={"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    )
    assert r.returncode == 1
    assert "nope" in r.stderr


def test_status_json(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    run("index", "--vault", str(small_vault.root), env=env)
    r = run("status", "--vault", str(small_vault.root), "--json", env=env)
    st = json.loads(r.stdout)
    assert st["notes"] == 2 and st["chunks"] >= 2 and st["index_bytes"] > 0
    assert {"vectors", "pending_vectors", "embedding"} <= set(st)


def test_invalid_config_reports_every_problem_and_exits_2(small_vault, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[search]\nmode = "telepathy"\nlimit = -1\n[embed]\nbatch_size = "many"\n')
    r = run("search", "x", "--vault", str(small_vault.root), "--config", str(cfg))
    assert r.returncode == 2
    for key in ("search.mode", "search.limit", "embed.batch_size"):
        assert key in r.stderr


def test_missing_vault_exits_2(tmp_path):
    r = run("index", "--vault", str(tmp_path / "nowhere"))
    assert r.returncode == 2
    assert "not a folder" in r.stderr


def test_bad_mode_flag_exits_2(small_vault):
    r = run("search", "x", "--vault", str(small_vault.root), "--mode", "psychic")
    assert r.returncode == 2


def test_vault_from_environment(small_vault):
    r = run(
        "index",
        "--json",
        env={"VAULT_BRAIN_VAULT": str(small_vault.root), "VAULT_BRAIN_EMBED_PROVIDER": "none"},
    )
    assert r.returncode == 0, r.stderr


def test_help_lists_every_command():
    r = run("--help")
    for cmd in ("init", "index", "reindex", "search", "get", "status", "watch", "serve", "trust"):
        assert cmd in r.stdout


def test_a_command_built_alone_parses_and_helps_as_in_the_whole_tree():
    """`vault-brain <command> …` builds only that command (cli._app_for): its help, its
    usage errors and its options must be the whole tree's, for every command."""
    from typer.testing import CliRunner

    from vault_brain.cli import _app_for, _command_name, app

    runner = CliRunner()
    names = [_command_name(c) for c in app.registered_commands]
    assert {"search", "index", "watch", "serve", "status", "import"} <= set(names)
    for name in names:
        for args in ([name, "--help"], [name, "--no-such-option"]):
            alone = runner.invoke(_app_for(args), args)
            whole = runner.invoke(app, args)
            assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output), args
    assert _app_for(["serch", "x"]) is app  # a misspelt name gets the tree's suggestions
    assert _app_for(["--version"]) is app


def _indexed_an_hour_after_its_edits(small_vault) -> tuple[str, dict[str, str]]:
    """(the vault, the env) once indexed with full text only, its files' mtimes an hour
    back: files saved just now are read again by every pass (sync.py: the mtime tick)."""
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    an_hour_ago = time.time() - 3600
    for note in small_vault.root.rglob("*.md"):
        os.utime(note, (an_hour_ago, an_hour_ago))
    vault = str(small_vault.root)
    assert run("index", "--vault", vault, env=env).returncode == 0
    return vault, env


def test_a_one_shot_full_text_search_imports_only_what_it_uses(small_vault):
    """A one-shot search pays for every module it imports (docs/benchmarks.md, issue 23):
    no HTTP client (httpx pulls in rich and pygments), no numpy, no model runtime; and when
    no note changed, no note parser (YAML), chunker, write path, secret patterns or `regex`
    package (an ASCII query). A note that changed loads the parser, as it must."""
    vault, env = _indexed_an_hour_after_its_edits(small_vault)
    lean = (
        *("httpx", "rich", "pygments", "numpy", "onnxruntime", "sentencepiece", "model2vec"),
        "yaml",
        "regex",
        "vault_brain.vault.note",
        "vault_brain.vault.writer",
        "vault_brain.vault.history",
        "vault_brain.vault.render",
        "vault_brain.index.chunking",
        "vault_brain.text.secrets",
        "importlib.metadata",
        "base64",  # the listing's cursors (index/shared.py)
        "typer",  # a plain search is parsed without it (vault_brain/cli_search.py)
        *(("filelock",) if os.name == "posix" else ()),  # the indexer lock is an flock there
    )
    code = (
        "import atexit, json, sys\n"
        "before = set(sys.modules)\n"  # what the interpreter's own start loaded (site, .pth)
        f"lean = {lean!r}\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted(m for m in lean "
        "if m in sys.modules and m not in before)), file=sys.stderr))\n"
        "from vault_brain.entry import main\n"
        f"sys.argv = ['vault-brain', 'search', 'deploy the canary', '--vault', {vault!r}, "
        "'--mode', 'fts', '--json']\n"
        "main()\n"
    )

    def loaded() -> list[str]:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**full_env, **env},
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
        line = [x for x in r.stderr.splitlines() if x.startswith("LOADED ")][-1]
        return json.loads(line[len("LOADED ") :])

    assert loaded() == []
    small_vault.write("Notes/New.md", "# New\n\nA note written since the index.\n")
    assert "vault_brain.vault.note" in loaded()


def test_a_search_of_an_unchanged_vault_writes_nothing_to_the_index(small_vault):
    """A refresh that finds nothing changed must not write: a write transaction per
    one-shot search cost four fsyncs (tens of ms on a VM) and the write lock."""
    vault, env = _indexed_an_hour_after_its_edits(small_vault)
    index = index_of(small_vault.root)

    def files() -> dict[str, tuple[int, int]]:
        found = [index, index.with_name(index.name + "-wal")]
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in found if p.exists()}

    before = files()
    for _ in range(2):
        r = run("search", "deploy the canary", "--vault", vault, "--mode", "fts", env=env)
        assert r.returncode == 0 and "Deploy" in r.stdout, r.stderr
    assert files() == before


def test_init_writes_config_and_indexes(small_vault):
    r = run("init", "--vault", str(small_vault.root), env={"VAULT_BRAIN_EMBED_PROVIDER": "none"})
    assert r.returncode == 0, r.stderr
    assert (small_vault.root / ".vault-brain" / "config.toml").is_file()
    assert index_of(small_vault.root).is_file()
    assert sorted(p.name for p in (small_vault.root / ".vault-brain").iterdir()) == ["config.toml"]


@pytest.mark.slow
def test_readme_run_command_works_on_the_sample_vault(tmp_path):
    import shutil

    vault = tmp_path / "sample_vault"
    shutil.copytree(REPO / "sample_vault", vault, ignore=shutil.ignore_patterns(".vault-brain"))
    r = run("index", "--vault", str(vault))
    assert r.returncode == 0, r.stderr
    r = run("search", "how do we deploy to production", "--vault", str(vault), "--json")
    assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy to production.md"
    status = json.loads(run("status", "--vault", str(vault), "--json").stdout)
    # The kernel that made the multilingual vectors, checked against the reference here.
    assert status["strong_kernel"] in ("int8-native", "int8", "int8-u8u8", "fp32")
    assert status["strong_agreement"] >= 0.999
    assert "kernel" in run("status", "--vault", str(vault)).stdout


def test_get_finds_a_note_written_after_indexing(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    run("index", "--vault", str(small_vault.root), env=env)
    small_vault.write("Later.md", "---\nid: later001\n---\n# Later\n")
    r = run("get", "later001", "--vault", str(small_vault.root), "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == "Later.md"


def test_status_says_whether_a_watcher_keeps_the_index_fresh(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    run("index", "--vault", str(small_vault.root), env=env)
    assert (
        json.loads(run("status", "--vault", str(small_vault.root), "--json", env=env).stdout)[
            "watched"
        ]
        is False
    )
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full_env.update(env)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "vault_brain", "watch", "--vault", str(small_vault.root)],
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    try:
        for line in watcher.stderr:
            if '"watch_started"' in line:
                break
        st = json.loads(run("status", "--vault", str(small_vault.root), "--json", env=env).stdout)
        assert st["watched"] is True and st["indexer"] is False
    finally:
        watcher.terminate()
        watcher.wait(timeout=HANG_SECONDS)


def test_search_on_an_empty_vault_says_no_matches(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("search", "anything at all", "--vault", str(empty))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no matches"
    assert "Traceback" not in r.stderr


def test_status_speaks_in_words_and_units(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    assert run("index", "--vault", str(small_vault.root), env=env).returncode == 0
    r = run("status", "--vault", str(small_vault.root), env=env)
    assert r.returncode == 0, r.stderr
    assert "notes        2 in 2 chunks" in r.stdout
    assert " KB)" in r.stdout or " MB)" in r.stdout
    assert "nothing watches the vault" in r.stdout
    assert "index_bytes" not in r.stdout and "False" not in r.stdout


def test_a_dead_embedding_endpoint_gives_one_readable_line_not_json_logs(small_vault):
    from tests.fakes.llm_server import closed_port_url

    env = {
        "VAULT_BRAIN_EMBED_PROVIDER": "ollama",
        "VAULT_BRAIN_EMBED_BASE_URL": closed_port_url(),
        "VAULT_BRAIN_EMBED_MODEL": "nomic-embed-text",
        "VAULT_BRAIN_EMBED_TIMEOUT_SECONDS": "2",
    }
    for args in (("index",), ("search", "deploy")):
        r = run(*args, "--vault", str(small_vault.root), env=env)
        assert r.returncode == 0, r.stderr
        assert not any(line.startswith("{") for line in r.stderr.splitlines()), r.stderr
    assert (
        "full-text search still works"
        in run("index", "--vault", str(small_vault.root), env=env).stderr
    )


def test_full_reindex_rebuilds_the_same_index(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    assert run("index", "--vault", str(small_vault.root), env=env).returncode == 0
    before = json.loads(
        run("get", "Notes/Tea.md", "--json", "--vault", str(small_vault.root), env=env).stdout
    )
    full = run("index", "--full", "--json", "--vault", str(small_vault.root), env=env)
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout)["added"] == 2
    after = json.loads(
        run("get", "Notes/Tea.md", "--json", "--vault", str(small_vault.root), env=env).stdout
    )
    assert after == before


def test_a_reader_that_stops_early_is_not_an_error(small_vault, tmp_path):
    # `vault-brain get … | head -1`: the output is bigger than a pipe holds, so the write
    # fails once head has exited. That is a quiet exit 0, with nothing on stderr.
    body = "".join(f"line {i} of a long note about tea\n" for i in range(20_000))
    small_vault.write("Long.md", "# Long\n\n" + body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    env["VAULT_BRAIN_EMBED_PROVIDER"] = "none"
    script = (
        f'"{sys.executable}" -m vault_brain get Long.md --vault "{small_vault.root}" '
        f'2>"{tmp_path / "stderr"}" | head -1; echo "status=${{PIPESTATUS[0]}}"'
    )
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.splitlines() == ["# Long", "status=0"]
    assert (tmp_path / "stderr").read_text() == ""


def test_a_vault_config_with_an_endpoint_is_refused_until_trusted(small_vault, tmp_path):
    config = small_vault.root / ".vault-brain" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(
        '[embed]\nprovider = "ollama"\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\n'
        "timeout_seconds = 1\n",
        encoding="utf-8",
    )
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": ""}  # trust goes under HOME
    refused = run("status", "--vault", str(small_vault.root), env=env)
    assert refused.returncode == 2
    assert "embed.base_url" in refused.stderr and "vault-brain trust" in refused.stderr
    trusted = run("trust", "--vault", str(small_vault.root), env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert "embed.base_url" in trusted.stdout
    assert (tmp_path / "home" / ".config" / "vault-brain" / "trusted.json").is_file()
    assert run("status", "--vault", str(small_vault.root), "--json", env=env).returncode == 0
    assert run("trust", "--revoke", "--vault", str(small_vault.root), env=env).returncode == 0
    assert run("status", "--vault", str(small_vault.root), env=env).returncode == 2


def test_an_index_folder_that_is_a_file_is_said_plainly(small_vault, tmp_path):
    (tmp_path / "cache" / "vault-brain").mkdir(parents=True)
    (tmp_path / "cache" / "vault-brain" / "indexes").write_text("not a folder")
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = run("index", "--vault", str(small_vault.root), env=env)
    assert r.returncode == 1
    assert "a file stands there" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture
def immutable_index(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    assert run("index", "--vault", str(small_vault.root), env=env).returncode == 0
    db = index_of(small_vault.root)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here: no immutable-file test")
    yield small_vault
    subprocess.run(["chattr", "-i", str(db)], capture_output=True)


def test_an_immutable_index_is_reported_and_search_still_answers(immutable_index):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    immutable_index.write("New.md", "# New\n\nkumquat\n")
    r = run("index", "--vault", str(immutable_index.root), env=env)
    assert r.returncode == 1
    assert "cannot be written" in r.stderr and "Traceback" not in r.stderr
    found = run("search", "green tea", "--vault", str(immutable_index.root), env=env)
    assert found.returncode == 0, found.stderr
    assert "Green tea" in found.stdout
    assert "index refresh failed" in found.stderr and "Traceback" not in found.stderr


def test_history_and_restore_bring_back_what_an_update_replaced(vault):
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    settings = load_settings(vault=str(vault.root), env=env)
    with Brain(settings) as brain:
        saved = brain.save("Packing", "the red scarf, written by hand")
        brain.update(saved.id, saved.version, content="the model's rewrite")
    listed = run("history", "Packing", "--json", "--vault", str(vault.root), env=env)
    assert listed.returncode == 0, listed.stderr
    versions = json.loads(listed.stdout)["versions"]
    assert len(versions) == 1
    back = run("restore", "Packing", versions[0]["name"], "--vault", str(vault.root), env=env)
    assert back.returncode == 0, back.stderr
    assert "the red scarf" in vault.read("Packing.md")
    again = json.loads(
        run("history", "Packing", "--json", "--vault", str(vault.root), env=env).stdout
    )
    assert len(again["versions"]) == 2  # the rewrite it replaced is kept in turn


def test_a_deleted_note_can_be_restored_from_its_history_by_path(vault):
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    with Brain(load_settings(vault=str(vault.root), env=env)) as brain:
        saved = brain.save("Gone", "first words")
        updated = brain.update(saved.id, saved.version, content="second words")
        brain.delete(saved.id, updated.version)
    listed = json.loads(
        run("history", "Gone.md", "--json", "--vault", str(vault.root), env=env).stdout
    )
    # Newest first: what the delete removed, then what the update replaced.
    assert len(listed["versions"]) == 2
    name = listed["versions"][1]["name"]
    assert run("restore", "Gone.md", name, "--vault", str(vault.root), env=env).returncode == 0
    assert "first words" in vault.read("Gone.md")


def test_search_says_nothing_relevant_and_min_score_zero_shows_the_weak_matches(small_vault):
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    vault = str(small_vault.root)
    # "tea" matches a note, "zebra" none: a weak match the default cut-off hides.
    weak = "zebra giraffe tea"
    r = run("search", weak, "--vault", vault, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("nothing relevant (1 weak match"), r.stdout
    r = run("search", weak, "--vault", vault, "--min-score", "0", "--json", env=env)
    found = json.loads(r.stdout)
    assert found["results"] and "nothing_relevant" not in found
    cut = json.loads(run("search", weak, "--vault", vault, "--json", env=env).stdout)
    assert cut["results"] == [] and cut["nothing_relevant"] is True
    r = run("search", weak, "--vault", vault, "--min-score", "1.5", env=env)
    assert r.returncode == 2 and "min-score" in r.stderr.lower()


def test_get_by_a_title_two_notes_share_names_both_and_prints_neither(vault):
    vault.write("Work/Ideas.md", "---\nid: work0001\n---\n# Ideas\n\nfor work\n")
    vault.write("Home/Ideas.md", "---\nid: home0001\n---\n# Ideas\n\nfor home\n")
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none", "VAULT_BRAIN_EMBED_STRONG": "none"}
    r = run("get", "Ideas", "--vault", str(vault.root), env=env)
    assert r.returncode != 0 and r.stdout == ""
    assert "work0001" in r.stderr and "Home/Ideas.md" in r.stderr


def test_onnxruntime_keeps_no_telemetry_store_unless_the_user_says_otherwise(tmp_path):
    """vault_brain/__init__.py: onnxruntime's import opens a telemetry store in the user's
    cache (Microsoft/DeveloperTools/.onnxruntime, an SQLite file written with fsyncs at
    import and at exit), paid by every first hybrid search; a user's own
    ORT_DISABLE_TELEMETRY stands."""
    pytest.importorskip("onnxruntime")
    code = "import os, vault_brain, onnxruntime; print(os.environ['ORT_DISABLE_TELEMETRY'])"
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    for theirs, seen in ((None, "1"), ("0", "0")):
        cache = tmp_path / f"cache-{theirs}"
        cache.mkdir()
        r = subprocess.run(
            [sys.executable, "-c", code],
            env={
                **env,
                "XDG_CACHE_HOME": str(cache),
                **({"ORT_DISABLE_TELEMETRY": theirs} if theirs else {}),
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.stdout.strip() == seen, r.stderr
        if theirs is None:  # (with "0" it is there, in the onnxruntime of this writing)
            assert not (cache / "Microsoft").exists(), sorted(cache.rglob("*"))


def test_numpys_blas_runs_one_thread_unless_the_user_says_otherwise():
    """vault_brain/__init__.py: OpenBLAS's spinning threads cost a one-shot search ~90
    CPU-ms; a user's own OPENBLAS_NUM_THREADS stands."""
    code = "import os, vault_brain, numpy; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for theirs, seen in ((None, "1"), ("3", "3")):
        r = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, **({"OPENBLAS_NUM_THREADS": theirs} if theirs else {})},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.stdout.strip() == seen, r.stderr


def test_the_command_ends_at_once_after_a_plain_search_and_only_then(small_vault):
    """`vault-brain search` with plain arguments ends its process as soon as its answer is
    written and its index closed: the interpreter's teardown (atexit handlers, every
    module's objects) is skipped; the answer, the exit code and the index are as before.
    Every other command, a usage error and an error exit as Python does."""
    vault = str(small_vault.root)
    env = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('TORN DOWN', file=sys.stderr))\n"
        "from vault_brain.entry import command\n"
        "sys.argv = ['vault-brain', *sys.argv[1:]]\n"
        "command()\n"
    )

    def command(*args: str) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env={**full_env, **env},
            timeout=120,
        )

    assert command("index", "--vault", vault).returncode == 0
    r = command("search", "deploy the canary", "--vault", vault, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["path"] == "How-to/Deploy.md"
    assert "TORN DOWN" not in r.stderr
    assert not index_of(small_vault.root).with_name("index.db-wal").exists()  # closed whole
    lines = command("search", "deploy the canary", "--vault", vault)
    assert lines.returncode == 0 and "Deploy to production" in lines.stdout
    for args, code_ in (
        (("status", "--vault", vault), 0),
        (("search", "deploy", "--vault", vault, "--limit", "0"), 2),  # typer's usage error
        (("search", "deploy", "--vault", vault, "--since", "yesterday-ish"), 2),
        (("search", "deploy", "--vault", str(small_vault.root / "missing")), 2),
    ):
        r = command(*args)
        assert r.returncode == code_, (args, r.stderr)
        assert "TORN DOWN" in r.stderr, args
