"""OpenTelemetry traces (SPEC §17): the only module that imports `opentelemetry`.

Each turn is one trace: a root `turn` span, opened at intake, with child spans for intake,
recall, assembly (with the cache figures), each model call (GenAI semantic-convention attributes),
the streaming of its answer, each tool call and each delivery. Trace and span ids ride every log
line written inside a span (`add_trace_ids`, a structlog processor) and each turn record.

Off by default and then free: without `[otel] endpoint` (or without the `otel` extra installed)
nothing is imported and every call here is a no-op returning shared no-op objects. Message
content is never put on a span unless `[otel] content = true`; even then only bounded text.

`install(settings)` (the composition root) exports over OTLP/HTTP through the SDK's batch
processor; `install_exporter(exporter)` serves tests (the SDK's in-memory exporter, simple
processor). The tracer provider is this module's own, never the process-global one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

CONTENT_MAX_CHARS = 4096
# Environment variables the OTLP exporter reads request headers from (often a collector's key).
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
Value = str | int | float | bool | list[str] | None


class _State:
    tracer: Tracer | None = None
    provider: TracerProvider | None = None
    content: bool = False


_state = _State()


class TraceSpan:
    """One span, or nothing when tracing is off: `set` adds attributes, `text` adds message
    content only where content is enabled."""

    __slots__ = ("_span",)

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def set(self, **attributes: Value) -> None:
        if self._span is None:
            return
        for key, value in attributes.items():
            if value is not None:
                self._span.set_attribute(key.replace("__", "."), value)

    def text(self, key: str, value: str) -> None:
        if self._span is not None and _state.content:
            self._span.set_attribute(key, value[:CONTENT_MAX_CHARS])

    def failed(self, error: str) -> None:
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, error))


_OFF = TraceSpan(None)


class TurnTrace:
    """A turn's root span, opened at intake and ended when the turn is done (in another task)."""

    __slots__ = ("_span",)

    def __init__(self, span: Span | None) -> None:
        self._span = span

    @contextlib.contextmanager
    def active(self, *, end: bool = False) -> Iterator[TraceSpan]:
        """Make the turn's span current (children attach to it); `end` ends it on exit."""
        if self._span is None:
            yield _OFF
            return
        from opentelemetry import trace

        with trace.use_span(self._span, end_on_exit=end, record_exception=False):
            yield TraceSpan(self._span)

    def end(self) -> None:
        if self._span is not None:
            self._span.end()


NO_TURN = TurnTrace(None)


def enabled() -> bool:
    return _state.tracer is not None


def open_turn(**attributes: str | int | None) -> TurnTrace:
    """A new trace's root span (not yet current)."""
    tracer = _state.tracer
    if tracer is None:
        return NO_TURN
    from opentelemetry import context

    # A fresh root: never a child of whatever happens to be current (another turn's task).
    span = tracer.start_span("turn", context=context.Context())
    TraceSpan(span).set(**{f"bot.{key}": value for key, value in attributes.items()})
    return TurnTrace(span)


class _Off(contextlib.AbstractContextManager[TraceSpan]):
    """The block's span when tracing is off: one shared object, nothing to do."""

    def __enter__(self) -> TraceSpan:
        return _OFF

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _Off()


def span(name: str, **attributes: Value) -> contextlib.AbstractContextManager[TraceSpan]:
    """A child of the current span for the block (`a__b` keys become `a.b` attributes)."""
    if _state.tracer is None:
        return _NO_SPAN
    return _span(name, attributes)


@contextlib.contextmanager
def _span(name: str, attributes: dict[str, Value]) -> Iterator[TraceSpan]:
    tracer = _state.tracer
    assert tracer is not None
    with tracer.start_as_current_span(name, record_exception=False) as current:
        handle = TraceSpan(current)
        handle.set(**attributes)
        yield handle


def finished_span(name: str, start_ns: int, **attributes: str | int | float | bool | None) -> None:
    """A child span of the current one that began at `start_ns` (time.time_ns) and ends now."""
    tracer = _state.tracer
    if tracer is None:
        return
    done = tracer.start_span(name, start_time=start_ns)
    TraceSpan(done).set(**attributes)
    done.end()


def now_ns() -> int:
    return time.time_ns()


def trace_id() -> str | None:
    """The current trace's id (32 hex digits), or None outside a trace."""
    if _state.tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def add_trace_ids(
    logger: object, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: the current trace and span ids on every line written in a span."""
    if _state.tracer is None:
        return event
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", f"{context.trace_id:032x}")
        event.setdefault("span_id", f"{context.span_id:016x}")
    return event


def traces_url(endpoint: str) -> str:
    """Where traces are posted: `<endpoint>/v1/traces`."""
    return endpoint.rstrip("/") + "/v1/traces"


def shown_url(url: str) -> str:
    """The URL as it may be printed or logged: without user, password, query or fragment (where a
    collector's credentials would be)."""
    parts = urlsplit(url)
    host_and_port = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host_and_port, parts.path, "", ""))


def install(endpoint: str, *, service: str, content: bool = False, timeout: float = 10.0) -> None:
    """Export every turn's trace to an OTLP/HTTP collector at `endpoint` (its base URL; traces
    go to `traces_url(endpoint)`), batched. Raises ImportError when the extra is missing."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=timeout)
    _install(BatchSpanProcessor(exporter), service, content)


def install_exporter(
    exporter: SpanExporter, *, service: str = "bot", content: bool = False
) -> None:
    """Export each span as it ends (tests: the SDK's InMemorySpanExporter)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    _install(SimpleSpanProcessor(exporter), service, content)


def _install(processor: Any, service: str, content: bool) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    shutdown()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor)
    _state.provider = provider
    _state.tracer = provider.get_tracer("bot")
    _state.content = content


def shutdown() -> None:
    """Export what is batched and stop tracing (idempotent)."""
    provider = _state.provider
    _state.tracer = None
    _state.provider = None
    _state.content = False
    if provider is not None:
        provider.shutdown()


def available() -> bool:
    """Whether the `otel` extra is installed."""
    try:
        import opentelemetry.exporter.otlp.proto.http
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True
