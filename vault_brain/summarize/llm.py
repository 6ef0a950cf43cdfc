"""Summaries from a chat model: Ollama (`/api/chat`) or any OpenAI-compatible
`/v1/chat/completions` (OpenAI, LM Studio, vLLM, llama.cpp's server).

One request per note. Every failure (refused, slow, HTTP error, a reply of the wrong shape,
a reply that is all reasoning) becomes Unavailable; retrying with back-off belongs to the
background queue in service.py, so a dead endpoint costs one fast failure. Messages carry
the endpoint and the reason, never the note's text.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx

from vault_brain.config import SummarySettings
from vault_brain.errors import ConfigError, Unavailable
from vault_brain.summarize.clean import clean_summary

# Enough of a note to summarise it, short enough for a small model's context window.
MAX_INPUT_CHARS = 8000
# Requests in flight at once: local servers mostly answer one at a time anyway.
CONCURRENCY = 2

SYSTEM_PROMPT = (
    "You summarise notes from a personal knowledge base. Reply with a summary of one or "
    "two sentences that says what the note is about, written in the same language as the "
    "note itself. Reply with the summary only: no preamble, no label, no list, no Markdown, "
    "no quotation marks."
)


def prompt(title: str, body: str) -> list[dict[str, str]]:
    """The chat messages for one note (the body cut to MAX_INPUT_CHARS)."""
    text = body.strip()
    if len(text) > MAX_INPUT_CHARS:
        text = text[:MAX_INPUT_CHARS] + "\n[…]"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Title: {title}\n\n{text}"},
    ]


class Summarizer:
    """Shared request handling and cleaning; subclasses know one wire protocol."""

    provider = ""
    path = ""
    concurrency = CONCURRENCY

    def __init__(self, settings: SummarySettings, api_key: str | None = None) -> None:
        self.name = f"{self.provider}:{settings.model}"
        self.model = settings.model
        self.url = self._endpoint(settings.base_url)
        self.max_chars = settings.max_chars
        self.timeout = settings.timeout_seconds
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client_lock = threading.Lock()
        self._client: httpx.Client | None = None

    # -- protocol specifics -------------------------------------------------------------

    def _endpoint(self, base_url: str) -> str:
        return base_url.rstrip("/") + self.path

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _content(self, payload: Any) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the one public call ------------------------------------------------------------

    def summarize(self, title: str, body: str) -> str:
        """A one- or two-sentence summary of the note, cleaned and capped to max_chars."""
        payload = self._post(self._body(prompt(title, body)))
        summary = clean_summary(self._content(payload), self.max_chars)
        if not summary:
            raise self._unavailable("reply holds no summary (only reasoning, or empty)")
        return summary

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- one request --------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout),
                    headers=self._headers,
                    limits=httpx.Limits(max_connections=self.concurrency),
                )
            return self._client

    def _post(self, body: dict[str, Any]) -> Any:
        try:
            response = self._http().post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise self._unavailable(f"timed out after {self.timeout:g} s") from exc
        except httpx.HTTPError as exc:
            raise self._unavailable(f"request failed ({type(exc).__name__})") from exc
        if response.status_code != 200:
            reason = response.reason_phrase or "error"
            raise self._unavailable(f"HTTP {response.status_code} {reason}")
        try:
            return response.json()
        except ValueError as exc:
            raise self._unavailable("reply is not JSON") from exc

    def _unavailable(self, reason: str) -> Unavailable:
        return Unavailable(
            f"summary endpoint {self.name} at {_safe_url(self.url)}: {reason}",
            provider=self.provider,
        )


class OllamaSummarizer(Summarizer):
    """POST /api/chat {"model", "messages", "stream": false} → {"message": {"content"}}."""

    provider = "ollama"
    path = "/api/chat"

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": messages,
            "stream": False,
            "options": {"temperature": 0.2},
        }

    def _content(self, payload: Any) -> str:
        message = payload.get("message") if isinstance(payload, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._unavailable("reply has no 'message.content'")
        return content


class OpenAISummarizer(Summarizer):
    """POST /v1/chat/completions {"model", "messages"} → {"choices": [{"message"}]}.

    No temperature is sent: OpenAI's reasoning models refuse any value but their default.
    """

    provider = "openai"
    path = "/v1/chat/completions"

    def _endpoint(self, base_url: str) -> str:
        base = base_url.rstrip("/").removesuffix("/v1")  # "http://host:1234" or ".../v1"
        return base + self.path

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "stream": False}

    def _content(self, payload: Any) -> str:
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._unavailable("reply has no 'choices'")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            content = "".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        if not isinstance(content, str):
            raise self._unavailable("reply has no 'choices[0].message.content'")
        return content


def make_summarizer(settings: SummarySettings) -> Summarizer | None:
    """The configured summarizer, or None for provider "none" (the extractive lead stands).
    An API key is read from the environment once, here."""
    if settings.provider == "none":
        return None
    api_key = None
    if settings.api_key_env:
        api_key = os.environ.get(settings.api_key_env, "")
        if not api_key:
            raise ConfigError(
                [f"summary.api_key_env: environment variable {settings.api_key_env} is not set"]
            )
    if settings.provider == "ollama":
        return OllamaSummarizer(settings, api_key)
    if settings.provider == "openai":
        return OpenAISummarizer(settings, api_key)
    raise ConfigError(
        [f"summary.provider: {settings.provider!r} is not one of none, ollama, openai"]
    )


def _safe_url(url: str) -> str:
    """The endpoint without any user:password part, fit for messages and logs."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url
