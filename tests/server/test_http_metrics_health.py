"""GET /metrics (Prometheus text, behind the token) and an honest /health (`indexing` while a
first pass runs, `degraded` with the reason while an endpoint fails), on uvicorn over loopback
with the real mcp client making the calls that are counted."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.llm_server import FakeLLMServer
from tests.waiting import HANG_SECONDS

from .harness import TOKEN, http_client_for, start_http_server, write_vault

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scrape(server) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics as {(name, sorted labels): value}."""
    response = httpx.get(server.url + "/metrics", headers=AUTH, timeout=HANG_SECONDS)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    vault = write_vault(tmp_path_factory.mktemp("metrics"))
    server = start_http_server(vault, {"VAULT_BRAIN_TOKEN": TOKEN})
    client = http_client_for(server)
    client.wait_indexed()
    yield server, client
    client.close()
    server.stop()


def test_metrics_needs_the_token(served):
    server, _ = served
    response = httpx.get(server.url + "/metrics", timeout=HANG_SECONDS)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.get(
        server.url + "/metrics", headers={"Authorization": "Bearer no"}, timeout=HANG_SECONDS
    )
    assert wrong.status_code == 401


def test_tool_calls_latency_and_errors_are_counted_by_tool(served):
    server, client = served
    before = scrape(server)
    for _ in range(3):
        client.ok("memory_search", {"query": "release"})
    missing = client.call("memory_get", {"id": "no-such-note-anywhere"})
    assert missing.is_error and missing.data["code"] == "NOT_FOUND"
    after = scrape(server)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("vault_brain_tool_calls_total", tool="memory_search") == 3
    assert delta("vault_brain_tool_calls_total", tool="memory_get") == 1
    assert delta("vault_brain_tool_errors_total", tool="memory_get", code="NOT_FOUND") == 1
    assert delta("vault_brain_tool_errors_total", tool="memory_search", code="NOT_FOUND") == 0
    assert delta("vault_brain_tool_latency_seconds_count", tool="memory_search") == 3
    assert delta("vault_brain_tool_latency_seconds_sum", tool="memory_search") > 0
    inf = delta("vault_brain_tool_latency_seconds_bucket", tool="memory_search", le="+Inf")
    assert inf == 3


def test_an_unknown_tool_name_is_counted_under_one_label(served):
    server, client = served
    before = scrape(server)
    assert client.call("memory_forget_everything", {}).is_error
    after = scrape(server)
    key = ("vault_brain_tool_calls_total", (("tool", "unknown"),))
    assert after[key] - before.get(key, 0.0) == 1
    assert not any("memory_forget_everything" in str(labels) for _, labels in after)


def test_index_gauges_match_health(served):
    server, _ = served
    health = httpx.get(server.url + "/health", timeout=HANG_SECONDS).json()
    samples = scrape(server)
    assert samples[("vault_brain_notes", ())] == health["notes"] >= 4
    assert samples[("vault_brain_chunks", ())] == health["chunks"]
    assert samples[("vault_brain_pending_vectors", (("tier", "instant"),))] == 0
    assert samples[("vault_brain_pending_summaries", ())] == health["pending_summaries"]
    assert samples[("vault_brain_index_bytes", ())] > 0
    assert samples[("vault_brain_indexing", ())] == 0
    assert samples[("vault_brain_endpoint_failing", (("endpoint", "embed"),))] == 0


def test_health_is_ok_with_no_reason_when_all_is_well(served):
    server, _ = served
    body = httpx.get(server.url + "/health", timeout=HANG_SECONDS).json()
    assert body["status"] == "ok" and body["reason"] is None


def test_health_says_degraded_and_why_while_the_embedding_endpoint_fails(tmp_path):
    vault = write_vault(tmp_path / "vault")
    with FakeLLMServer() as llm:
        llm.behaviour.mode = "error500"
        env = {
            "VAULT_BRAIN_EMBED_PROVIDER": "openai",
            "VAULT_BRAIN_EMBED_BASE_URL": llm.url + "/v1",
            "VAULT_BRAIN_EMBED_MODEL": "fake",
            "VAULT_BRAIN_EMBED_DIMENSION": "8",
            "VAULT_BRAIN_TOKEN": TOKEN,
        }
        server = start_http_server(vault, env)
        try:
            body = wait_for_health(server, lambda b: b.get("status") == "degraded")
            assert "embedding" in body["reason"] and body["last_error"]
            samples = scrape(server)
            assert samples[("vault_brain_endpoint_failing", (("endpoint", "embed"),))] == 1
            assert samples[("vault_brain_pending_vectors", (("tier", "instant"),))] > 0
        finally:
            server.stop()


def test_health_says_indexing_with_counts_while_the_first_pass_runs(tmp_path):
    vault = tmp_path / "vault"
    count = 6000
    for n in range(count):
        note = vault / f"Area {n % 20}" / f"Note {n}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# Note {n}\n\nheron {n}. " + "word " * 300, encoding="utf-8")
    server = start_http_server(vault)
    try:
        seen = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            response = httpx.get(server.url + "/health", timeout=HANG_SECONDS)
            body = response.json()
            seen.append(body)
            if body.get("status") == "ok" and body["notes"] == count:
                break
            time.sleep(0.05)
        indexing = [b for b in seen if b.get("status") == "indexing"]
        assert indexing, "the first pass ended before /health saw it running"
        for b in indexing:  # `total` is 0 while the files are still being counted
            assert b["indexing"]["total"] in (0, count)
            assert 0 <= b["indexing"]["done"] <= b["indexing"]["total"]
        assert seen[-1]["status"] == "ok" and seen[-1]["indexing"] is None
    finally:
        server.stop()


def wait_for_health(server, ready, timeout: float = HANG_SECONDS) -> dict:
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = httpx.get(server.url + "/health", timeout=HANG_SECONDS).json()
        if ready(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"/health never got there: {body}")
