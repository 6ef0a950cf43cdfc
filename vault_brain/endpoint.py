"""One model server's JSON endpoint (Ollama or OpenAI-compatible), shared by the remote
embedders and the summarizers.

Every failure (refused, slow, HTTP error, not JSON) becomes Unavailable with the status and
the reason, never the text that was sent; retries with back-off belong to the background
queue, so a dead endpoint costs one fast failure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from vault_brain.errors import ConfigError, Unavailable

if TYPE_CHECKING:
    import httpx

_cap = threading.local()


@contextmanager
def waiting_at_most(seconds: float) -> Iterator[None]:
    """Requests this thread makes meanwhile wait at most `seconds` each, whatever the
    endpoint's own timeout: a read (a search, the catch-up a CLI search runs first) answers
    from full text rather than wait out a hung server's 30 s (search/semantic.py gives a
    query embedding 2 s the same way)."""
    before = current_cap()
    _cap.seconds = seconds if before is None else min(before, seconds)
    try:
        yield
    finally:
        _cap.seconds = before


def current_cap() -> float | None:
    """The wait `waiting_at_most` set for this thread, or None."""
    return getattr(_cap, "seconds", None)


def endpoint_url(base_url: str, path: str, *, openai: bool) -> str:
    """base_url + path; OpenAI-compatible servers are configured with or without `/v1`."""
    base = base_url.rstrip("/")
    if openai:
        base = base.removesuffix("/v1")
    return base + path


def api_key_from_env(section: str, variable: str) -> str | None:
    """The key named by `<section>.api_key_env`, read once; a named but unset variable is a
    configuration error (retrying cannot fix it)."""
    if not variable:
        return None
    key = os.environ.get(variable, "")
    if not key:
        raise ConfigError([f"{section}.api_key_env: environment variable {variable} is not set"])
    return key


def safe_url(url: str) -> str:
    """The endpoint without any user:password part, fit for messages and logs."""
    import httpx  # here: a search that never calls an endpoint need not import it (0.1 s)

    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url


class JsonEndpoint:
    """POST JSON, get JSON: one pooled client (made on first use), a timeout, errors mapped."""

    def __init__(
        self,
        url: str,
        *,
        what: str,
        provider: str,
        timeout: float,
        concurrency: int,
        api_key: str | None,
    ) -> None:
        self.url = url
        self.what = what  # "embedding endpoint ollama:nomic-embed-text"
        self.provider = provider
        self.timeout = timeout
        self._concurrency = max(1, concurrency)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout),
                    headers=self._headers,
                    limits=httpx.Limits(max_connections=self._concurrency),
                )
            return self._client

    def post(self, body: dict[str, Any], *, cap: float | None = None) -> Any:
        """`cap`: wait at most this long (else this thread's `waiting_at_most`, else the
        endpoint's timeout)."""
        cap = cap if cap is not None else current_cap()
        wait = self.timeout if cap is None else min(self.timeout, cap)
        import httpx

        try:
            if wait < self.timeout:
                response = self._http().post(self.url, json=body, timeout=httpx.Timeout(wait))
            else:
                response = self._http().post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise self.unavailable(f"timed out after {wait:g} s") from exc
        except httpx.HTTPError as exc:
            raise self.unavailable(f"request failed ({type(exc).__name__})") from exc
        if response.status_code != 200:
            reason = response.reason_phrase or "error"
            raise self.unavailable(f"HTTP {response.status_code} {reason}")
        try:
            return response.json()
        except ValueError as exc:
            raise self.unavailable("reply is not JSON") from exc

    def unavailable(self, reason: str) -> Unavailable:
        return Unavailable(f"{self.what} at {safe_url(self.url)}: {reason}", provider=self.provider)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
