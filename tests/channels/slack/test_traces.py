"""One Slack mention, one OpenTelemetry trace (SPEC §17): the whole App against the fake Slack
and the fake model, spans caught by the SDK's in-memory exporter or by a local OTLP/HTTP receiver
(a loopback aiohttp server decoding the protobuf export request)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot import tracing
from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack

SECRET_WORDS = "the launch code is swordfish"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.install_exporter(exporter)
    yield exporter
    tracing.shutdown()


def by_start(found: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return sorted(found, key=lambda s: s.start_time or 0)


async def test_a_slack_mention_is_one_trace_with_its_spans_in_order(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    spans: InMemorySpanExporter,
) -> None:
    claude.script(
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "launch"})]),
        "Nothing stored about that.",
    )
    async with App(make_config()) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, SECRET_WORDS))
        [summary] = await app.store.records.recent(limit=1)
        record = await app.store.records.show(summary.turn_id)
    found = by_start(spans.get_finished_spans())
    assert len({s.context.trace_id for s in found if s.context}) == 1, "one trace"
    names = [s.name for s in found]
    assert names == [
        "turn",
        "intake",
        "recall",
        "assembly",
        "chat claude-sonnet-4-6",
        "execute_tool memory_recall",
        "chat claude-sonnet-4-6",
        "streaming",  # the answer's text as it arrived (the tool round streamed none)
        "delivery",
    ]
    root = found[0]
    assert root.parent is None
    assert all(s.parent is not None for s in found[1:])
    attributes = {s.name: dict(s.attributes or {}) for s in found}
    chat = [dict(s.attributes or {}) for s in found if s.name.startswith("chat ")]
    assert chat[0]["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert chat[0]["gen_ai.operation.name"] == "chat"
    assert chat[0]["gen_ai.usage.input_tokens"] > 0
    assert "gen_ai.usage.cache_read.input_tokens" in chat[1]
    assert "gen_ai.usage.cache_creation.input_tokens" in chat[0]
    assert chat[0]["gen_ai.usage.output_tokens"] > 0
    assert attributes["assembly"]["bot.cache.breakpoints"] >= 1
    assert attributes["execute_tool memory_recall"]["gen_ai.tool.name"] == "memory_recall"
    assert attributes["delivery"]["bot.delivered"] is True
    assert attributes["streaming"]["bot.deltas"] >= 1
    streaming = next(s for s in found if s.name == "streaming")
    assert streaming.parent is not None
    assert streaming.parent.span_id == found[6].context.span_id  # type: ignore[union-attr]
    # The turn record carries the trace id; no span carries what was said.
    assert root.context is not None
    assert record is not None
    assert f"{root.context.trace_id:032x}" in json.dumps(record)
    everything = json.dumps([dict(s.attributes or {}) for s in found], default=str)
    assert "swordfish" not in everything
    assert "Nothing stored" not in everything


async def test_content_rides_the_spans_only_when_enabled(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    exporter = InMemorySpanExporter()
    tracing.install_exporter(exporter, content=True)
    try:
        claude.script("Nothing stored about that.")
        async with App(make_config()) as app:
            await send(slack, app, slack.mention(GENERAL, ALICE, SECRET_WORDS))
    finally:
        tracing.shutdown()
    everything = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    assert "Nothing stored about that." in everything


def test_log_lines_written_in_a_span_carry_its_ids(spans: InMemorySpanExporter) -> None:
    with tracing.span("outer"):
        line = tracing.add_trace_ids(None, "info", {"event": "x"})
        current = tracing.trace_id()
    assert line["trace_id"] == current
    assert len(line["span_id"]) == 16
    assert tracing.add_trace_ids(None, "info", {"event": "y"}) == {"event": "y"}


def test_tracing_off_costs_nothing() -> None:
    assert not tracing.enabled()
    with tracing.span("anything", a=1) as span:
        span.set(b=2)
        span.text("c", "d")
        span.failed("e")
        assert tracing.trace_id() is None
    turn = tracing.open_turn(turn_id="t")
    assert turn is tracing.NO_TURN
    with turn.active(end=True):
        pass
    tracing.finished_span("x", tracing.now_ns())
    assert tracing.add_trace_ids(None, "info", {"event": "z"}) == {"event": "z"}


class Receiver:
    """A local OTLP/HTTP trace receiver: decodes each export request's protobuf body."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        self.requests.append(export)
        self.content_types.append(request.content_type)
        return web.Response(body=b"", content_type="application/x-protobuf")

    def spans(self) -> list[tuple[str, dict[str, object]]]:
        found = []
        for export in self.requests:
            for resource in export.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        values = {a.key: _value(a.value) for a in span.attributes}
                        found.append((span.name, values))
        return found


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    got = Receiver()
    app = web.Application()
    app.router.add_post("/v1/traces", got.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield got, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_a_configured_endpoint_receives_the_turns_trace_over_otlp_http(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    receiver: tuple[Receiver, str],
) -> None:
    got, url = receiver
    claude.script("Shipped.")
    config = make_config(f'\n[otel]\nendpoint = "{url}"\nservice_name = "bot-test"\n')
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "ship it?"))
    # Leaving the app flushed the batch processor.
    assert not tracing.enabled()
    assert set(got.content_types) == {"application/x-protobuf"}
    names = [name for name, _ in got.spans()]
    assert {"turn", "intake", "assembly", "chat claude-sonnet-4-6", "delivery"} <= set(names)
    chat = next(values for name, values in got.spans() if name.startswith("chat "))
    assert chat["gen_ai.request.model"] == "claude-sonnet-4-6"
    service = got.requests[0].resource_spans[0].resource.attributes
    assert any(a.key == "service.name" and a.value.string_value == "bot-test" for a in service)
