"""Remote providers against a real HTTP server on loopback that speaks both protocols."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.fakes.llm_server import FakeLLMServer, closed_port_url, fake_vector
from tests.waiting import HANG_SECONDS, wait_until
from vault_brain.config import EmbedSettings
from vault_brain.embed import make_embedder
from vault_brain.embed.remote import PROBE_TEXT, RemoteEmbedder
from vault_brain.errors import ConfigError, Unavailable

PROVIDERS = ["ollama", "openai"]
PATHS = {"ollama": "/api/embed", "openai": "/v1/embeddings"}


def remote(server: FakeLLMServer, provider: str, **changes) -> RemoteEmbedder:
    values = {"provider": provider, "base_url": server.url, "model": "fake-embed"}
    values.update(changes)
    embedder = make_embedder(EmbedSettings(**values))
    assert isinstance(embedder, RemoteEmbedder)
    return embedder


def expected(texts: list[str], dimension: int = 8) -> np.ndarray:
    rows = np.array([fake_vector(t, dimension) for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_vectors_come_back_normalised_in_input_order(llm_server, provider):
    texts = ["alpha", "beta", "gamma", "delta"]
    vectors = remote(llm_server, provider).embed(texts)
    assert vectors.dtype == np.float32
    assert np.allclose(vectors, expected(texts), atol=1e-6)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_name_is_provider_and_model(llm_server, provider):
    assert remote(llm_server, provider).name == f"{provider}:fake-embed"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_request_names_the_model_and_uses_the_protocol_path(llm_server, provider):
    remote(llm_server, provider).embed(["text"])
    (seen,) = llm_server.seen()
    assert (seen.path, seen.model) == (PATHS[provider], "fake-embed")


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_base_url_works_with_or_without_v1(llm_server, suffix):
    remote(llm_server, "openai", base_url=llm_server.url + suffix).embed(["text"])
    assert [s.path for s in llm_server.seen()] == ["/v1/embeddings"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ten_texts_with_batch_size_three_make_four_requests(llm_server, provider):
    texts = [f"text {i}" for i in range(10)]
    vectors = remote(llm_server, provider, batch_size=3).embed(texts)
    assert sorted(llm_server.batch_sizes()) == [1, 3, 3, 3]
    assert np.allclose(vectors, expected(texts), atol=1e-6)


def test_batches_run_at_most_concurrency_at_once(llm_server):
    llm_server.behaviour.hold = True
    embedder = remote(llm_server, "ollama", batch_size=1, concurrency=2)
    texts = [f"text {i}" for i in range(6)]
    result: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: result.append(embedder.embed(texts)))
    worker.start()
    try:
        # Two requests held at the server: both of the client's slots are taken.
        wait_until(lambda: llm_server.in_flight == 2, "two requests at once")
    finally:
        llm_server.release()
        worker.join(HANG_SECONDS)
    assert np.allclose(result[0], expected(texts), atol=1e-6)
    assert llm_server.max_in_flight == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_slow_endpoint_times_out_as_unavailable(llm_server, provider):
    llm_server.behaviour.hold = True  # no reply while the call waits: only its timeout ends it
    embedder = remote(llm_server, provider, timeout_seconds=0.2)
    with pytest.raises(Unavailable, match="timed out"):
        embedder.embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_http_500_is_unavailable_with_the_status(llm_server, provider):
    llm_server.behaviour.mode = "error500"
    with pytest.raises(Unavailable, match="HTTP 500"):
        remote(llm_server, provider).embed(["text"])


def test_unavailable_is_retryable(llm_server):
    llm_server.behaviour.mode = "error500"
    with pytest.raises(Unavailable) as caught:
        remote(llm_server, "ollama").embed(["text"])
    assert caught.value.retryable


def test_error_message_never_contains_the_text_sent(llm_server):
    llm_server.behaviour.mode = "error500"
    with pytest.raises(Unavailable) as caught:
        remote(llm_server, "openai").embed(["my secret diary entry"])
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_that_is_not_json_is_unavailable(llm_server, provider):
    llm_server.behaviour.mode = "garbage"
    with pytest.raises(Unavailable, match="not JSON"):
        remote(llm_server, provider).embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_without_the_vectors_field_is_unavailable(llm_server, provider):
    llm_server.behaviour.mode = "missing_field"
    with pytest.raises(Unavailable, match="reply has no"):
        remote(llm_server, provider).embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_with_too_few_vectors_is_unavailable(llm_server, provider):
    llm_server.behaviour.mode = "wrong_count"
    with pytest.raises(Unavailable, match="1 vectors for 2 texts"):
        remote(llm_server, provider).embed(["one", "two"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_of_the_wrong_configured_dimension_is_unavailable(llm_server, provider):
    llm_server.behaviour.mode = "wrong_dim"
    with pytest.raises(Unavailable, match="dimension 9, expected 8"):
        remote(llm_server, provider, dimension=8).embed(["text"])


def test_reply_that_changes_dimension_after_the_probe_is_unavailable(llm_server):
    embedder = remote(llm_server, "ollama")
    assert embedder.dimension() == 8
    llm_server.behaviour.mode = "wrong_dim"
    with pytest.raises(Unavailable, match="dimension 9, expected 8"):
        embedder.embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_with_nan_is_unavailable(llm_server, provider):
    llm_server.behaviour.mode = "nan"
    with pytest.raises(Unavailable, match="non-finite"):
        remote(llm_server, provider).embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_dead_endpoint_is_unavailable_at_once_not_at_the_timeout(provider):
    # A refused connection is the answer, not waited out to the timeout (a "timed out"
    # after the hang deadline, if it were) nor retried until then.
    settings = EmbedSettings(
        provider=provider, base_url=closed_port_url(), model="m", timeout_seconds=HANG_SECONDS
    )
    with pytest.raises(Unavailable, match="ConnectError"):
        make_embedder(settings).embed(["text"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_failing_endpoint_is_asked_once_per_batch_not_retried(llm_server, provider):
    llm_server.behaviour.mode = "error500"
    with pytest.raises(Unavailable):
        remote(llm_server, provider).embed(["text"])
    assert len(llm_server.seen()) == 1  # retries belong to the background queue


def test_dimension_is_probed_once_and_cached(llm_server):
    embedder = remote(llm_server, "openai")
    assert (embedder.dimension(), embedder.dimension()) == (8, 8)
    assert [s.inputs for s in llm_server.seen()] == [(PROBE_TEXT,)]


def test_configured_dimension_needs_no_probe(llm_server):
    assert remote(llm_server, "ollama", dimension=8).dimension() == 8
    assert llm_server.seen() == []


def test_empty_texts_are_not_sent_and_embed_as_zero_vectors(llm_server):
    vectors = remote(llm_server, "openai", dimension=8).embed(["", "text", "  "])
    assert [s.inputs for s in llm_server.seen()] == [("text",)]
    assert not vectors[0].any() and not vectors[2].any()


def test_empty_list_sends_nothing(llm_server):
    assert remote(llm_server, "ollama", dimension=8).embed([]).shape == (0, 8)
    assert llm_server.seen() == []


def test_api_key_from_the_named_variable_is_sent_as_bearer(llm_server, monkeypatch):
    monkeypatch.setenv("FAKE_EMBED_KEY", "sk-test-123")
    llm_server.behaviour.require_api_key = "sk-test-123"
    remote(llm_server, "openai", api_key_env="FAKE_EMBED_KEY").embed(["text"])
    assert llm_server.seen()[0].authorization == "Bearer sk-test-123"


def test_no_authorization_header_without_api_key_env(llm_server):
    remote(llm_server, "openai").embed(["text"])
    assert llm_server.seen()[0].authorization == ""


def test_api_key_env_that_is_not_set_is_a_config_error(llm_server, monkeypatch):
    monkeypatch.delenv("FAKE_EMBED_KEY_UNSET", raising=False)
    with pytest.raises(ConfigError, match="FAKE_EMBED_KEY_UNSET"):
        remote(llm_server, "openai", api_key_env="FAKE_EMBED_KEY_UNSET")


def test_wrong_api_key_is_unavailable_with_401(llm_server, monkeypatch):
    monkeypatch.setenv("FAKE_EMBED_KEY", "wrong")
    llm_server.behaviour.require_api_key = "right"
    with pytest.raises(Unavailable, match="HTTP 401"):
        remote(llm_server, "openai", api_key_env="FAKE_EMBED_KEY").embed(["text"])
