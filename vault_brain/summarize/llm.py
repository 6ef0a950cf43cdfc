"""Summaries from a chat model: Ollama (`/api/chat`) or any OpenAI-compatible
`/v1/chat/completions` (OpenAI, LM Studio, vLLM, llama.cpp's server).

One request per note. Every failure (refused, slow, HTTP error, a reply of the wrong shape,
a reply that is all reasoning) becomes Unavailable; retrying with back-off belongs to the
background queue in service.py, so a dead endpoint costs one fast failure. Messages carry
the endpoint and the reason, never the note's text.
"""

from __future__ import annotations

from typing import Any

from vault_brain.config import SummarySettings
from vault_brain.endpoint import JsonEndpoint, api_key_from_env, endpoint_url
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
        self.max_chars = settings.max_chars
        self.endpoint = JsonEndpoint(
            endpoint_url(settings.base_url, self.path, openai=self.provider == "openai"),
            what=f"summary endpoint {self.name}",
            provider=self.provider,
            timeout=settings.timeout_seconds,
            concurrency=self.concurrency,
            api_key=api_key,
        )
        self.url = self.endpoint.url

    # -- protocol specifics -------------------------------------------------------------

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _content(self, payload: Any) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the one public call ------------------------------------------------------------

    def summarize(self, title: str, body: str) -> str:
        """A one- or two-sentence summary of the note, cleaned and capped to max_chars."""
        payload = self.endpoint.post(self._body(prompt(title, body)))
        summary = clean_summary(self._content(payload), self.max_chars)
        if not summary:
            raise self._unavailable("reply holds no summary (only reasoning, or empty)")
        return summary

    def close(self) -> None:
        self.endpoint.close()

    def _unavailable(self, reason: str) -> Unavailable:
        return self.endpoint.unavailable(reason)


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
    api_key = api_key_from_env("summary", settings.api_key_env)
    if settings.provider == "ollama":
        return OllamaSummarizer(settings, api_key)
    if settings.provider == "openai":
        return OpenAISummarizer(settings, api_key)
    raise ConfigError(
        [f"summary.provider: {settings.provider!r} is not one of none, ollama, openai"]
    )
