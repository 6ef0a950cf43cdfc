"""`vault-brain import` as a person runs it: a real process over a temp vault, real export
files with the apps' field names and nesting, and the files it leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.importers.exports import (
    chatgpt_conversation,
    chatgpt_node,
    claude_conversation,
    write_json,
    write_jsonl,
)

FAST = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}  # full text only: no model to load


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full.update(env if env is not None else FAST)
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
    )


def imp(vault, fmt: str, *files: Path, extra: tuple[str, ...] = (), env: dict | None = None):
    return run("import", fmt, *map(str, files), "--vault", str(vault.root), *extra, env=env)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the vault but the index folder: bytes and modification time."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".vault-brain"):
            out[rel] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


def frontmatter(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    _, block, body = text.split("---\n", 2)
    return yaml.safe_load(block), body


@pytest.fixture
def notes(vault):
    """A few notes a conversation can mention or match."""
    vault.write(
        "How-to/Deploy to production.md",
        "---\ntitle: Deploy to production\naliases: [Ship to prod]\n---\n"
        "# Deploy to production\n\nMerge to main; Argo CD syncs; Argo Rollouts runs a canary "
        "that checks latency and the 5xx rate. To roll back a canary, abort the rollout.\n",
    )
    vault.write(
        "People/Tom Becker.md", "# Tom Becker\n\nSRE in Hamburg. Owns the Postgres backups.\n"
    )
    vault.write(
        "Projects/Postgres Upgrade.md",
        "# Postgres Upgrade\n\nUpgrade pg-main from 14 to 16 with pg_upgrade --link after a "
        "restore drill. Logical replication needs wal_level = logical.\n",
    )
    return vault


CANARY = claude_conversation(
    "5b1c0a2e-0000-4000-8000-000000000001",
    "Canary rollback",
    [
        ("human", "How do I roll back a canary in Argo Rollouts? Tom Becker says abort."),
        ("assistant", "Yes: `kubectl argo rollouts abort`. See the deploy to production runbook."),
    ],
)


# --- one note per conversation -----------------------------------------------------------


def test_a_claude_export_becomes_one_note_per_conversation(notes, tmp_path):
    other = claude_conversation("c2", "", [("human", "What is a good sourdough hydration?")])
    export = write_json(tmp_path / "conversations.json", [CANARY, other])
    r = imp(notes, "claude", export)
    assert r.returncode == 0, r.stderr
    assert "2 conversations: 2 notes written" in r.stdout
    note = notes.root / "Conversations" / "Canary rollback.md"
    meta, body = frontmatter(note)
    assert meta["title"] == "Canary rollback"
    assert meta["source"] == "claude:5b1c0a2e-0000-4000-8000-000000000001"
    assert str(meta["created"]).startswith("2026-11-30 09:00:00")
    assert str(meta["updated"]).startswith("2026-11-30 09:01:30")
    assert len(meta["imported_chats"][meta["source"]]) == 2
    assert body.startswith("**User** · 2026-11-30 09:00\n\nHow do I roll back")
    assert "**Claude** · 2026-11-30 09:01" in body
    # Mentions of existing notes became links, once each, never inside code.
    assert "[[Tom Becker]] says abort" in body
    assert "[[Deploy to production|deploy to production]] runbook" in body
    assert "`kubectl argo rollouts abort`" in body
    # A conversation without a name is titled by its first question.
    assert (notes.root / "Conversations" / "What is a good sourdough hydration.md").exists()


def test_importing_the_same_export_twice_changes_no_file(notes, tmp_path):
    export = write_json(tmp_path / "conversations.json", [CANARY])
    assert imp(notes, "claude", export).returncode == 0
    before = snapshot(notes.root)
    r = imp(notes, "claude", export)
    assert r.returncode == 0, r.stderr
    assert "same    Conversations/Canary rollback.md  (already imported)" in r.stdout
    assert "0 notes written" in r.stdout
    assert snapshot(notes.root) == before


def test_a_conversation_that_grew_gets_only_its_new_messages(notes, tmp_path):
    export = write_json(tmp_path / "conversations.json", [CANARY])
    assert imp(notes, "claude", export).returncode == 0
    note = notes.root / "Conversations" / "Canary rollback.md"
    first_body = frontmatter(note)[1]
    grown = json.loads(json.dumps(CANARY))
    more = claude_conversation("x", "x", [("human", "a"), ("assistant", "b"), ("human", "Thanks!")])
    grown["chat_messages"].append(more["chat_messages"][2])
    grown["updated_at"] = "2026-11-30T09:02:30.000000Z"
    r = imp(notes, "claude", write_json(tmp_path / "later.json", [grown]))
    assert r.returncode == 0, r.stderr
    assert "append  Conversations/Canary rollback.md  (+1 of 3 messages)" in r.stdout
    meta, body = frontmatter(note)
    assert body.startswith(first_body.rstrip("\n"))
    assert body.endswith("**User** · 2026-11-30 09:02\n\nThanks!\n")
    assert body.count("How do I roll back") == 1
    assert len(meta["imported_chats"][meta["source"]]) == 3
    assert str(meta["updated"]).startswith("2026-11-30 09:02:30")


def test_a_chatgpt_export_gives_the_conversation_the_person_saw(notes, tmp_path):
    conv = chatgpt_conversation(
        "67a1f0c2-aaaa-4bbb-8ccc-000000000002",
        "Postgres replication",
        [("user", "Does logical replication need a restart?"), ("assistant", "First answer")],
    )
    m = conv["mapping"]
    n0, n1 = "67a1f0c2-aaaa-4bbb-8ccc-000000000002-n0", "67a1f0c2-aaaa-4bbb-8ccc-000000000002-n1"
    m[n0]["children"] = [n1, "regen"]
    m["regen"] = chatgpt_node(
        "regen", "assistant", "Yes: wal_level = logical needs one.", n0, [], 1.795e9
    )
    conv["current_node"] = "regen"
    r = imp(notes, "chatgpt", write_json(tmp_path / "conversations.json", [conv]))
    assert r.returncode == 0, r.stderr
    meta, body = frontmatter(notes.root / "Conversations" / "Postgres replication.md")
    assert meta["source"] == "chatgpt:67a1f0c2-aaaa-4bbb-8ccc-000000000002"
    assert "**ChatGPT**" in body and "wal_level = logical needs one" in body
    assert "First answer" not in body


def test_jsonl_logs_split_by_conversation_become_notes(notes, tmp_path):
    log = write_jsonl(
        tmp_path / "chats.jsonl",
        [
            {"conversation_id": "a", "role": "user", "content": "Plan the postgres upgrade"},
            {"conversation_id": "b", "role": "user", "content": "Best tea temperature?"},
            {"conversation_id": "a", "role": "assistant", "content": "Start with a drill."},
        ],
    )
    r = imp(notes, "jsonl", log, extra=("--folder", "Chats"))
    assert r.returncode == 0, r.stderr
    meta, body = frontmatter(notes.root / "Chats" / "Plan the postgres upgrade.md")
    assert meta["source"] == "jsonl:a" and "**Assistant**\n\nStart with a drill." in body
    assert "[[Postgres Upgrade|postgres upgrade]]" in body
    assert (notes.root / "Chats" / "Best tea temperature.md").exists()


def test_an_imported_note_is_found_by_search_at_once(notes, tmp_path):
    assert imp(notes, "claude", write_json(tmp_path / "c.json", [CANARY])).returncode == 0
    r = run("search", "kubectl argo rollouts abort", "--vault", str(notes.root), "--json")
    paths = [h["path"] for h in json.loads(r.stdout)["results"]]
    assert "Conversations/Canary rollback.md" in paths


# --- broken exports: exit 2, nothing written ---------------------------------------------


def _truncated(tmp_path: Path) -> Path:
    text = json.dumps([CANARY], indent=1)
    path = tmp_path / "conversations.json"
    path.write_text(text[: len(text) - 40], encoding="utf-8")
    return path


def _no_text(tmp_path: Path) -> Path:
    bad = json.loads(json.dumps(CANARY))
    del bad["chat_messages"][1]["text"], bad["chat_messages"][1]["content"]
    return write_json(tmp_path / "conversations.json", [bad])


def _wrong_shape(tmp_path: Path) -> Path:
    return write_json(tmp_path / "conversations.json", {"chats": []})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_truncated, "conversations.json: line "),
        (_no_text, "conversations.json [0].chat_messages[1]: the message has no text"),
        (_wrong_shape, "conversations.json: expected a JSON list of conversations"),
        (lambda tmp: tmp / "missing.json", "missing.json: no such file"),
    ],
)
def test_a_broken_export_exits_2_names_the_place_and_writes_nothing(notes, tmp_path, make, message):
    good = write_json(tmp_path / "good.json", [claude_conversation("ok", "Fine", [("human", "x")])])
    broken = make(tmp_path)
    before = snapshot(notes.root)
    r = imp(notes, "claude", good, broken)
    assert r.returncode == 2, r.stdout
    assert message in r.stderr
    assert snapshot(notes.root) == before  # not even the good file's conversation


def test_a_note_over_the_size_cap_stops_the_run_before_anything_is_written(notes, tmp_path):
    small = claude_conversation("s", "Small", [("human", "short")])
    huge = claude_conversation("h", "Huge", [("human", "word " * 50_000)])
    export = write_json(tmp_path / "conversations.json", [small, huge])
    before = snapshot(notes.root)
    r = imp(notes, "claude", export, env={**FAST, "VAULT_BRAIN_VAULT_MAX_FILE_BYTES": "100000"})
    assert r.returncode == 1
    assert "conversations.json [1]: the note would be" in r.stderr
    assert "nothing was written" in r.stderr
    assert snapshot(notes.root) == before


def test_a_read_only_vault_refuses_to_import(notes, tmp_path):
    export = write_json(tmp_path / "c.json", [CANARY])
    before = snapshot(notes.root)
    r = imp(notes, "claude", export, env={**FAST, "VAULT_BRAIN_WRITE_READ_ONLY": "true"})
    assert r.returncode == 1 and "read-only" in r.stderr
    assert snapshot(notes.root) == before


def test_a_folder_outside_the_vault_is_refused_before_anything_is_written(notes, tmp_path):
    before = snapshot(notes.root)
    r = imp(
        notes, "claude", write_json(tmp_path / "c.json", [CANARY]), extra=("--folder", "../out")
    )
    assert r.returncode == 1 and "'..' is refused" in r.stderr
    assert snapshot(notes.root) == before and not (tmp_path / "out").exists()


def test_a_pasted_credential_is_imported_with_a_warning(notes, tmp_path):
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    chat = claude_conversation("k1", "Key trouble", [("human", f"Why is {key} refused?")] * 2)
    other = claude_conversation("k2", "Token", [("human", "ghp_" + "x7Y8z9" * 7)])
    r = imp(notes, "claude", write_json(tmp_path / "c.json", [chat, other]))
    assert r.returncode == 0, r.stderr
    assert "warning: 'Key trouble' holds what looks like a credential (OpenAI API key)" in r.stderr
    assert "warning: 'Token' holds what looks like a credential (GitHub token)" in r.stderr
    assert r.stderr.count("warning:") == 2 and key not in r.stderr


# --- dry run and merge -------------------------------------------------------------------

LOCAL = {"VAULT_BRAIN_EMBED_STRONG": "none"}  # the bundled static model: vectors + full text

ON_TOPIC = claude_conversation(
    "7c2d0a2e-0000-4000-8000-000000000003",
    "Rolling back a canary",
    [
        ("human", "How do I roll back a canary deploy to production when the 5xx rate rises?"),
        ("assistant", "Abort the rollout; Argo Rollouts shifts traffic back to the stable set."),
    ],
)
UNRELATED = claude_conversation(
    "u1", "Sourdough starter", [("human", "My sourdough starter smells of acetone. Why?")]
)


def test_dry_run_writes_nothing_and_shows_each_decision_with_its_score(notes, tmp_path):
    export = write_json(tmp_path / "c.json", [ON_TOPIC, UNRELATED])
    before = snapshot(notes.root)
    r = imp(notes, "claude", export, extra=("--dry-run", "--merge"), env=LOCAL)
    assert r.returncode == 0, r.stderr
    assert snapshot(notes.root) == before
    lines = r.stdout.splitlines()
    assert lines[0].startswith("merge   How-to/Deploy to production.md  (+2 of 2 messages; ")
    assert "scored" in lines[0] and ">= threshold" in lines[0]
    assert lines[1].startswith("new     Conversations/Sourdough starter.md  (1 message; ")
    assert "< threshold" in lines[1]
    assert lines[-1] == "dry run: 2 conversations, nothing written"
    report = json.loads(
        imp(notes, "claude", export, extra=("--dry-run", "--merge", "--json"), env=LOCAL).stdout
    )
    first, second = report["outcomes"]
    assert first["score"] >= report["threshold"] > second["score"]


def test_merge_appends_under_a_dated_heading_and_a_reimport_changes_nothing(notes, tmp_path):
    export = write_json(tmp_path / "c.json", [ON_TOPIC, UNRELATED])
    r = imp(notes, "claude", export, extra=("--merge",), env=LOCAL)
    assert r.returncode == 0, r.stderr
    meta, body = frontmatter(notes.root / "How-to" / "Deploy to production.md")
    assert meta["aliases"] == ["Ship to prod"] and meta["title"] == "Deploy to production"
    assert body.startswith("# Deploy to production\n\nMerge to main;")
    assert "\n## 2026-11-30 · Claude: Rolling back a canary\n\n**User** · 2026-11-30 09:00" in body
    assert "[[Deploy to production" not in body  # a note never links to itself
    assert list(meta["imported_chats"]) == ["claude:7c2d0a2e-0000-4000-8000-000000000003"]
    assert "source" not in meta
    assert (notes.root / "Conversations" / "Sourdough starter.md").exists()
    assert not (notes.root / "Conversations" / "Rolling back a canary.md").exists()

    before = snapshot(notes.root)
    again = imp(notes, "claude", export, extra=("--merge",), env=LOCAL)
    assert again.returncode == 0, again.stderr
    assert snapshot(notes.root) == before


def test_merge_without_vectors_says_it_matched_on_full_text_only(notes, tmp_path):
    export = write_json(tmp_path / "c.json", [ON_TOPIC])
    r = imp(notes, "claude", export, extra=("--dry-run", "--merge"))
    assert r.returncode == 0, r.stderr
    assert "warning: merge matches use full text only" in r.stderr


def test_a_merged_conversation_that_grew_adds_its_new_messages_to_the_same_note(notes, tmp_path):
    assert (
        imp(
            notes,
            "claude",
            write_json(tmp_path / "a.json", [ON_TOPIC]),
            extra=("--merge",),
            env=LOCAL,
        ).returncode
        == 0
    )
    grown = json.loads(json.dumps(ON_TOPIC))
    later = claude_conversation("x", "x", [("human", "a")], day="2026-12-02")["chat_messages"][0]
    later["text"] = later["content"][0]["text"] = "And if the stable set is gone?"
    grown["chat_messages"].append(later)
    # Without --merge too: the conversation is already in a note, and stays there.
    r = imp(notes, "claude", write_json(tmp_path / "b.json", [grown]), env=LOCAL)
    assert r.returncode == 0, r.stderr
    assert "merge   How-to/Deploy to production.md  (+1 of 3 messages)" in r.stdout
    meta, body = frontmatter(notes.root / "How-to" / "Deploy to production.md")
    assert body.count("## ") == 2 and body.count("How do I roll back a canary deploy") == 1
    assert body.endswith(
        "## 2026-12-02 · Claude: Rolling back a canary\n\n"
        "**User** · 2026-12-02 09:00\n\nAnd if the stable set is gone?\n"
    )
    assert len(meta["imported_chats"]["claude:7c2d0a2e-0000-4000-8000-000000000003"]) == 3
    assert not (notes.root / "Conversations").exists()


def test_the_same_conversation_given_twice_in_one_run_is_one_note(notes, tmp_path):
    export = write_json(tmp_path / "conversations.json", [CANARY])
    r = imp(notes, "claude", export, export)
    assert r.returncode == 0, r.stderr
    assert "1 conversation: 1 note written" in r.stdout
    _, body = frontmatter(notes.root / "Conversations" / "Canary rollback.md")
    assert body.count("How do I roll back") == 1


# --- summaries ---------------------------------------------------------------------------


def test_with_a_summary_provider_each_new_note_gets_a_one_line_summary(notes, tmp_path, llm_server):
    llm_server.behaviour.chat_reply = "How to roll back a canary.\nWith Argo Rollouts."
    env = {
        **FAST,
        "VAULT_BRAIN_SUMMARY_PROVIDER": "ollama",
        "VAULT_BRAIN_SUMMARY_BASE_URL": llm_server.url,
        "VAULT_BRAIN_SUMMARY_MODEL": "fake",
    }
    r = imp(notes, "claude", write_json(tmp_path / "c.json", [CANARY]), env=env)
    assert r.returncode == 0, r.stderr
    meta, _ = frontmatter(notes.root / "Conversations" / "Canary rollback.md")
    assert meta["summary"] == "How to roll back a canary. With Argo Rollouts."
    asked = llm_server.seen("/api/chat")
    assert len(asked) == 1 and "kubectl argo rollouts abort" in asked[0].messages[-1]["content"]


def test_help_names_the_formats_and_options():
    r = run("import", "--help")
    assert r.returncode == 0
    words = ("claude | chatgpt | jsonl", "wikilinks", "--folder", "--dry-run", "--merge", "--json")
    for word in words:
        assert word in r.stdout
