"""What the process serves besides the channels: traces exported over OTLP/HTTP, and the HTTP
port with `/healthz` and `/metrics`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from aiohttp import web

from bot import tracing
from bot.config import HttpSettings, OtelSettings
from bot.errors import ConfigError
from bot.logs import redact_text
from bot.metrics import CONTENT_TYPE, Metrics

log = structlog.get_logger(__name__)


def start_tracing(otel: OtelSettings, exits: contextlib.AsyncExitStack) -> None:
    """One trace per turn, exported over OTLP/HTTP, when `[otel] endpoint` is set."""
    if otel.endpoint is None:
        return
    if not tracing.available():
        raise ConfigError(
            f"otel.endpoint = {tracing.shown_url(otel.endpoint)!r}, but the OpenTelemetry "
            "packages are not installed. Fix: pip install -e '.[otel]' (the otel extra), or "
            "remove otel.endpoint."
        )
    tracing.install(otel.endpoint, service=otel.service_name, content=otel.content)
    # Last out: export what is batched, off the event loop (the exporter's HTTP call blocks).
    exits.push_async_callback(asyncio.to_thread, tracing.shutdown)
    log.info("traces_exporting", endpoint=tracing.shown_url(otel.endpoint), content=otel.content)


async def start_http(
    app: web.Application, settings: HttpSettings, exits: contextlib.AsyncExitStack
) -> web.AppRunner:
    """Listen on the configured port; a port that cannot be had stops start-up with the fix."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    exits.push_async_callback(runner.cleanup)
    site = web.TCPSite(runner, settings.host, settings.port)
    try:
        await site.start()
    except OSError as exc:
        raise ConfigError(
            f"http.port = {settings.port}: cannot listen on {settings.host}:{settings.port} "
            f"({exc.strerror}). Fix: choose a free port in [http] port, or set "
            "http.enabled = false when no HTTP features are needed."
        ) from exc
    log.info("http_listening", host=settings.host, port=listening_port(runner))
    return runner


def listening_port(runner: web.AppRunner | None) -> int | None:
    """The port the HTTP server listens on (the one the OS chose for port 0)."""
    if runner is None:
        return None
    for site in runner.sites:
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            return int(server.sockets[0].getsockname()[1])
    return None


class Health:
    """The `/healthz` and `/metrics` routes: up when every channel is connected and the host is
    not draining. The body lists the parts (channels, MCP servers) and, under `down`, why each
    one that is not up is down. An MCP server that is down costs only its tools' calls, so it
    does not make the host unhealthy."""

    def __init__(
        self,
        channels_up: Callable[[], dict[str, bool]],
        draining: Callable[[], bool],
        metrics: Metrics,
        *,
        down: Callable[[], Mapping[str, str]] = dict,
        mcp: Callable[[], Mapping[str, str | None]] = dict,
    ) -> None:
        """`down`: why each channel that could not start yet is down (it is being retried).
        `mcp`: each MCP server's problem (None while it is up)."""
        self._channels_up = channels_up
        self._draining = draining
        self._metrics = metrics
        self._down = down
        self._mcp = mcp

    def install(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics)

    async def healthz(self, request: web.Request) -> web.Response:
        channels = self._channels_up()
        draining = self._draining()
        ok = all(channels.values()) and not draining
        body: dict[str, Any] = {"ok": ok, "channels": channels}
        # Which part, and why (one line each; tried again meanwhile), while it is not up.
        down = {name: why for name, why in self._down().items() if not channels.get(name)}
        if servers := dict(self._mcp()):
            body["mcp"] = {name: problem is None for name, problem in servers.items()}
            # What a server wrote may hold a secret it was given.
            down |= {f"mcp:{n}": redact_text(why) for n, why in servers.items() if why}
        if down:
            body["down"] = down
        if draining:
            body["draining"] = True
        return web.json_response(body, status=200 if ok else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.render())
        response.content_type = "text/plain"
        response.headers["Content-Type"] = CONTENT_TYPE
        return response
