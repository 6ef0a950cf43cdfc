"""What `GET /metrics` says, in Prometheus' text format: tool calls, their latency and
errors by tool (counted as they happen), and the index's state (read from Brain.status at
each scrape). One Metrics per HTTP app, so two servers in one process never mix counts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest

from vault_brain.records import Status

# The classic text format, which every Prometheus (and compatible scraper) reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A search answers in milliseconds, a save of a big note or a remote embedding in seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UNKNOWN_TOOL = "unknown"  # a client's made-up tool name never becomes a label of its own

# No `*_created` series beside every counter: a timestamp per label set that no dashboard
# here needs (a process-wide switch of prometheus_client).
disable_created_metrics()


class Metrics:
    def __init__(self, tool_names: tuple[str, ...]) -> None:
        self.tool_names = frozenset(tool_names)
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "vault_brain_tool_calls", "MCP tool calls, by tool.", ["tool"], registry=self.registry
        )
        self.errors = Counter(
            "vault_brain_tool_errors",
            "MCP tool calls that failed, by tool and error code.",
            ["tool", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "vault_brain_tool_latency_seconds",
            "MCP tool call latency, by tool.",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.unauthorized = Counter(
            "vault_brain_http_unauthorized",
            "HTTP requests refused for a missing or wrong bearer token, by reason.",
            ["reason"],
            registry=self.registry,
        )

    def tool_call(self, tool: str, seconds: float, error: str | None = None) -> None:
        label = tool if tool in self.tool_names else UNKNOWN_TOOL
        self.calls.labels(label).inc()
        self.latency.labels(label).observe(seconds)
        if error is not None:
            self.errors.labels(label, error).inc()

    def render(self, status: Status | None) -> bytes:
        """The whole exposition: the counters, then the index's gauges (none of those while
        the index is still opening, only vault_brain_index_open 0)."""
        state = CollectorRegistry(auto_describe=False)
        state.register(_IndexGauges(status))
        return generate_latest(self.registry) + generate_latest(state)


class _IndexGauges:
    """The index as Brain.status saw it at this scrape."""

    def __init__(self, status: Status | None) -> None:
        self.status = status

    def collect(self) -> Iterator[Any]:
        st = self.status
        yield _gauge("vault_brain_index_open", "1 once the index is open.", float(st is not None))
        if st is None:
            return
        yield _gauge("vault_brain_notes", "Notes in the index.", st.notes)
        yield _gauge("vault_brain_chunks", "Chunks in the index.", st.chunks)
        yield _tiers(
            "vault_brain_vectors",
            "Chunks with a vector, by tier.",
            st.vectors,
            st.strong_vectors if st.strong_model else None,
        )
        yield _tiers(
            "vault_brain_pending_vectors",
            "Chunks waiting for a vector, by tier.",
            st.pending_vectors,
            st.strong_pending if st.strong_model else None,
        )
        yield _gauge(
            "vault_brain_pending_summaries", "Notes waiting for a summary.", st.pending_summaries
        )
        yield _gauge("vault_brain_index_bytes", "Size of the index on disk.", st.index_bytes)
        yield _gauge(
            "vault_brain_indexing",
            "1 while a first pass over the vault runs.",
            float(st.indexing is not None),
        )
        yield _gauge(
            "vault_brain_indexing_done_files",
            "Files the running first pass has indexed (0 when none runs).",
            st.indexing.done if st.indexing else 0,
        )
        yield _gauge(
            "vault_brain_indexing_total_files",
            "Files the running first pass will index (0 when none runs).",
            st.indexing.total if st.indexing else 0,
        )
        failing = GaugeMetricFamily(
            "vault_brain_endpoint_failing",
            "1 while the endpoint's last call failed (embed, summary, strong tier).",
            labels=["endpoint"],
        )
        failing.add_metric(["embed"], float(bool(st.embed_error)))
        failing.add_metric(["summary"], float(bool(st.summary_error)))
        failing.add_metric(["strong"], float(bool(st.strong_error)))
        yield failing


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _tiers(name: str, doc: str, instant: int, strong: int | None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["tier"])
    family.add_metric(["instant"], instant)
    if strong is not None:
        family.add_metric(["strong"], strong)
    return family
