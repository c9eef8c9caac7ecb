"""Webhooks: an authenticated `POST /hooks/<name>` on the HTTP port starts a request-driven turn.

The caller sends `Authorization: Bearer <token>` (compared in constant time) and a body of at
most `MAX_BODY_BYTES` of UTF-8 text, which replaces `{body}` in the hook's prompt template. The
answer is `202 {"run_id": ...}` at once; the turn runs in the background and leaves a run record
under `webhook:<name>`. Failures start no turn: 404 unknown hook, 401 bad or missing token,
413 body too large, 400 body not UTF-8, 429 too many runs of this hook in flight, 503 shutting down.
Neither the token nor the body is ever logged.
"""

from __future__ import annotations

import asyncio
import hmac
import uuid
from collections.abc import Sequence

import structlog
from aiohttp import web

from bot.ports.cron import CronTrigger
from channels.cron.plan import HookPlan
from channels.cron.runner import CronRunner

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_IN_FLIGHT_PER_HOOK = 8
ROUTE = "/hooks/{name}"
_BEARER = "bearer "


class WebhookEndpoint:
    """The `/hooks/<name>` route and the background runs it starts."""

    def __init__(
        self,
        hooks: Sequence[HookPlan],
        runner: CronRunner,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT_PER_HOOK,
    ) -> None:
        self._hooks = {hook.name: hook for hook in hooks}
        self._runner = runner
        self._max_body = max_body_bytes
        self._max_in_flight = max_in_flight
        self._in_flight: dict[str, set[asyncio.Task[None]]] = {name: set() for name in self._hooks}
        self._closed = False

    def install(self, app: web.Application) -> None:
        """Add the route; call before the HTTP server starts (aiohttp freezes the router)."""
        app.router.add_post(ROUTE, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        hook = self._hooks.get(request.match_info["name"])
        if hook is None:
            return _error(404, "no such webhook")
        if not _authorized(request, hook.token):
            log.warning("webhook_unauthorized", hook=hook.name)
            return _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        if self._closed:
            return _error(503, "the host is shutting down")
        body = await _read_bounded(request, self._max_body)
        if body is None:
            log.warning("webhook_body_too_large", hook=hook.name, limit=self._max_body)
            return _error(413, f"body larger than {self._max_body} bytes")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return _error(400, "body must be UTF-8 text")
        if len(self._in_flight[hook.name]) >= self._max_in_flight:
            return _error(429, "too many runs of this webhook in flight", {"Retry-After": "30"})
        run_id = uuid.uuid4().hex
        self._start(hook, text, run_id)
        log.info("webhook_accepted", hook=hook.name, turn_id=run_id, body_bytes=len(body))
        return web.json_response({"run_id": run_id, "status": "accepted"}, status=202)

    async def stop(self, grace: float = 30.0) -> None:
        """Refuse new calls; runs in flight get `grace` seconds to finish, then are cancelled."""
        self._closed = True
        tasks = [task for tasks in self._in_flight.values() for task in tasks]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def idle(self) -> None:
        """Return when no webhook run is in flight (tests, shutdown)."""
        while tasks := [task for tasks in self._in_flight.values() for task in tasks]:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _start(self, hook: HookPlan, text: str, run_id: str) -> None:
        async def run() -> None:
            await self._runner.run(
                hook.run, hook.prompt(text), trigger=CronTrigger.WEBHOOK, run_id=run_id
            )

        task = asyncio.create_task(run(), name=f"webhook:{hook.name}")
        tasks = self._in_flight[hook.name]
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def _authorized(request: web.Request, token: str) -> bool:
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith(_BEARER):
        return False
    offered = header[len(_BEARER) :].strip()
    return hmac.compare_digest(offered.encode(), token.encode())


async def _read_bounded(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it is larger than `limit`.

    The HTTP port's intake guard has already read it (bounded by the application's
    client_max_size), so this reads aiohttp's copy.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        return None
    body = await request.read()
    return body if len(body) <= limit else None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)
