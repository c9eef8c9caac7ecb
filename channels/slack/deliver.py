"""Posting answers to Slack through a hidden route: format, split, post in order, retry.

The first part goes where the route says (the mention's thread, or a DM's top level); the rest go
in the thread under the first part. A 429 waits for its Retry-After; a transient failure (5xx,
a dropped connection) is retried with backoff; both are bounded. Parts are posted one after
another, so a later part never overtakes an earlier one, and a part that finally fails stops the
rest (the report says how far it got).

`working()` puts a reaction on the triggering message while a turn runs. It is done in the
background so the turn never waits on it, and a failure there is only logged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.ports import DeliveryReport
from bot.turns import ReplyRoute
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.events import PLATFORM
from channels.slack.mrkdwn import to_mrkdwn
from channels.slack.split import MESSAGE_BUDGET, split_message

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 5  # per part
MAX_WAIT = 60.0  # the longest single wait, whatever Retry-After says
BACKOFF = 0.5  # first wait after a transient failure; doubles each time
TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)

Sleep = Callable[[float], Awaitable[None]]


class SlackDeliverer:
    """The Slack implementation of `bot.ports.Deliverer`."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        reaction: str = "hourglass_flowing_sand",
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._client = client
        self._reaction = reaction
        self._sleep = sleep
        self._signs: set[asyncio.Task[None]] = set()

    def route_to(self, destination: str) -> ReplyRoute:
        """A top-level route to a channel id (scheduled posts)."""
        return ReplyRoute(platform=PLATFORM, values={"channel": destination, "thread_ts": None})

    async def deliver(self, route: ReplyRoute, text: str) -> DeliveryReport:
        channel = route.values.get("channel")
        if not isinstance(channel, str) or not channel:
            return DeliveryReport(parts=0, accepted=0, error="route has no Slack channel")
        parts = split_message(to_mrkdwn(text), MESSAGE_BUDGET)
        if not parts:
            log.warning("slack_empty_answer")
            return DeliveryReport(parts=0, accepted=0)
        thread = route.values.get("thread_ts")
        accepted = 0
        for part in parts:
            try:
                ts = await self._post(channel, part, thread)
            except _PostFailed as failure:
                log.warning(
                    "slack_part_failed", part=accepted + 1, parts=len(parts), error=str(failure)
                )
                return DeliveryReport(parts=len(parts), accepted=accepted, error=str(failure))
            accepted += 1
            thread = thread or ts
        return DeliveryReport(parts=len(parts), accepted=accepted)

    async def _post(self, channel: str, text: str, thread: str | None) -> str | None:
        arguments: dict[str, Any] = {"channel": channel, "text": text}
        if thread:
            arguments["thread_ts"] = thread
        response = await self._with_retries(
            "chat.postMessage", lambda: self._client.chat_postMessage(**arguments)
        )
        ts = response.get("ts")
        return ts if isinstance(ts, str) else None

    async def _with_retries(
        self, method: str, call: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> AsyncSlackResponse:
        backoff = BACKOFF
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await call()
            except SlackApiError as exc:
                wait = _retry_after(exc)
                if wait is None and not _is_transient(exc):
                    raise _PostFailed(f"{method} failed: {error_code(exc)}") from None
                reason = error_code(exc)
            except CALL_ERRORS as exc:
                wait, reason = None, error_code(exc)
            if attempt == MAX_ATTEMPTS:
                break
            delay = min(MAX_WAIT, wait if wait is not None else backoff)
            backoff *= 2
            log.info("slack_retry", method=method, attempt=attempt, wait=delay, reason=reason)
            await self._sleep(delay)
        raise _PostFailed(f"{method} failed after {MAX_ATTEMPTS} attempts ({reason})")

    @contextlib.asynccontextmanager
    async def working(self, route: ReplyRoute) -> AsyncIterator[None]:
        channel, ts = route.values.get("channel"), route.values.get("message_ts")
        if not (isinstance(channel, str) and isinstance(ts, str)):
            yield
            return
        done = asyncio.Event()
        task = asyncio.create_task(self._show_working(channel, ts, done))
        self._signs.add(task)
        task.add_done_callback(self._signs.discard)
        try:
            yield
        finally:
            done.set()

    async def _show_working(self, channel: str, ts: str, done: asyncio.Event) -> None:
        added = await self._react("reactions_add", channel, ts)
        await done.wait()
        if added:
            await self._react("reactions_remove", channel, ts)

    async def _react(self, method: str, channel: str, ts: str) -> bool:
        try:
            await getattr(self._client, method)(channel=channel, timestamp=ts, name=self._reaction)
        except CALL_ERRORS as exc:
            log.info(
                "slack_reaction_failed", method=method.replace("_", "."), error=error_code(exc)
            )
            return False
        return True

    async def aclose(self) -> None:
        """Let progress signs finish removing themselves."""
        if self._signs:
            await asyncio.wait(set(self._signs), timeout=MAX_WAIT)


class _PostFailed(Exception):
    """A part could not be posted; the message names the API method and Slack's error."""


def _is_transient(exc: SlackApiError) -> bool:
    status = getattr(exc.response, "status_code", 0) or 0
    return status >= 500 or error_code(exc) in TRANSIENT_ERRORS


def _retry_after(exc: SlackApiError) -> float | None:
    response = exc.response
    if response is None or response.status_code != 429:
        return None
    headers = {str(k).lower(): v for k, v in (response.headers or {}).items()}
    value = headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0
