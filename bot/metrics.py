"""Prometheus metrics for the host: turns, latency, tokens, deliveries, queue depth, liveness,
MCP tool calls per server (read from each turn record's `tool_calls`), and approvals.

Each `Metrics` owns its own registry (not the process-global one), so several hosts in one test
process never share counters.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from bot.ports.records import TurnRecord

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160)


class Metrics:
    def __init__(
        self,
        queue_depth: Callable[[], int],
        channels_up: Callable[[], dict[str, bool]],
        cost: Callable[[TurnRecord], float] | None = None,
        mcp_servers: frozenset[str] = frozenset(),
    ) -> None:
        """`mcp_servers`: the configured server names (the only `server` label values, so a
        tool name the model invents cannot add series)."""
        self.registry = CollectorRegistry()
        self._cost = cost
        self._servers = mcp_servers
        self.turns = Counter(
            "bot_turns",
            "Turns finished, by channel and outcome",
            ["channel", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "bot_turn_latency_seconds",
            "Turn latency from start to delivery",
            ["channel"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "bot_model_tokens",
            "Model tokens by kind (input, cache_read, cache_write, output)",
            ["kind"],
            registry=self.registry,
        )
        # Per channel, so a dashboard can show each channel's cache hit rate
        # (cache_read / (input + cache_read + cache_write)) and an alert can fire when it drops.
        self.channel_tokens = Counter(
            "bot_channel_tokens",
            "Model tokens by channel and kind (input, cache_read, cache_write, output)",
            ["channel", "kind"],
            registry=self.registry,
        )
        self.cost = Counter(
            "bot_cost_usd",
            "What model calls cost in US dollars (from the price table), by channel",
            ["channel"],
            registry=self.registry,
        )
        self.deliveries = Counter(
            "bot_deliveries",
            "Answers delivered or failed, by channel",
            ["channel", "result"],
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "bot_mcp_tool_calls",
            "Calls to MCP server tools, by server and outcome (ok, error, refused)",
            ["server", "outcome"],
            registry=self.registry,
        )
        self.approvals = Counter(
            "bot_approvals",
            "Approval requests and decisions (requested, approved, denied, expired)",
            ["event"],
            registry=self.registry,
        )
        self._channels_up = channels_up
        self._up = self._gauges(queue_depth)

    def count_approval(self, event: str) -> None:
        """An `ApprovalDesk` observer: a request was made, or decided."""
        self.approvals.labels(event).inc()

    def _gauges(self, queue_depth: Callable[[], int]) -> Gauge:
        """The lane queue depth (read at each scrape) and, returned, each channel's liveness."""
        depth = Gauge(
            "bot_lane_queue_depth",
            "Turns running or waiting in conversation lanes",
            registry=self.registry,
        )
        depth.set_function(lambda: float(queue_depth()))
        return Gauge(
            "bot_channel_up",
            "1 when the channel's platform connection is live",
            ["channel"],
            registry=self.registry,
        )

    def observe(self, record: TurnRecord) -> None:
        """A `Host` observer: called once per finished turn."""
        self.turns.labels(record.channel, record.outcome).inc()
        seconds = (record.finished_at - record.started_at).total_seconds()
        self.latency.labels(record.channel).observe(max(seconds, 0.0))
        usage = record.usage
        for kind, value in (
            ("input", usage.input_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", usage.output_tokens),
        ):
            if value:
                self.tokens.labels(kind).inc(value)
                self.channel_tokens.labels(record.channel, kind).inc(value)
        if self._cost is not None and usage.total:
            self.cost.labels(record.channel).inc(self._cost(record))
        delivered = record.details.get("delivered")
        if delivered is not None:
            self.deliveries.labels(record.channel, "delivered" if delivered else "failed").inc()
        self._count_tool_calls(record.details.get("tool_calls"))

    def _count_tool_calls(self, calls: object) -> None:
        for call in calls if isinstance(calls, list | tuple) else ():
            server = str(call.get("tool", "")).partition("__")[0] if isinstance(call, dict) else ""
            if server in self._servers:
                self.tool_calls.labels(server, str(call.get("outcome", "error"))).inc()

    def render(self) -> bytes:
        for name, up in self._channels_up().items():
            self._up.labels(name).set(1.0 if up else 0.0)
        return generate_latest(self.registry)
