"""Posting answers to Slack through a hidden route: format, split, post in order, retry.

The first part goes where the route says (the mention's thread, or a DM's top level); the rest go
in the thread under the first part. A 429 waits for its Retry-After; a transient failure (5xx,
a dropped connection) is retried with backoff; both are bounded. Parts are posted one after
another, so a later part never overtakes an earlier one, and a part that finally fails stops the
rest (the report says how far it got).

For the host's outbox, `render` gives the parts and `post` posts one of them, returning its `ts`.
Every post carries message metadata naming its part id, so that `find` can look in the thread (or
the DM's recent history) for a part whose post went through but was never confirmed, instead of
posting it twice: after a restart, and before `post` tries again after a failure that may have
come after Slack took the message (a 5xx, an `internal_error`, a timeout, a dropped connection;
a 429 is a refusal, so it is simply tried again). When the thread cannot be read then, the part
is not posted blind: it is left for the next try (the outbox keeps it).

`working()` shows a progress sign while a turn runs (`channels.slack.progress`): a session's or
an assistant thread's status, else a reaction on the triggering message.

Streaming (`live`, `finish`; the sessions are `channels.slack.stream`): `stream = "native"` uses
Slack's streaming methods in threads (edits at a DM's top level, where Slack cannot stream),
`"edits"` posts and updates, `"off"` posts answers whole. `finish` ends a streamed message with
its final part: the stream stopped if it still runs, the text set by `chat.update` (with the
part's metadata); a message removed meanwhile is posted anew. When Slack refuses streaming, one
warning says why and how to fix it, and answers are posted whole from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.errors import PartDelayed, PartFailed
from bot.ports.delivery import Deliverer
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute
from channels.slack.api import CALL_ERRORS, error_code, retry_after
from channels.slack.assistant import AssistantPane
from channels.slack.events import PLATFORM
from channels.slack.mrkdwn import to_mrkdwn
from channels.slack.progress import ProgressSigns
from channels.slack.sessions import AgentSessions
from channels.slack.split import MESSAGE_BUDGET, split_message
from channels.slack.stream import PART_EVENT, OpenMessages, SlackLive, StreamMode, metadata
from channels.slack.tables import table_blocks

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 5  # per part
MAX_WAIT = 60.0  # the longest single wait, whatever Retry-After says
BACKOFF = 0.5  # first wait after a transient failure; doubles each time
TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)
FIND_LIMIT = 200  # messages looked through for one part after a restart

Sleep = Callable[[float], Awaitable[None]]


class SlackDeliverer(Deliverer):
    """The Slack implementation of `bot.ports.delivery.Deliverer`."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        reaction: str = "hourglass_flowing_sand",
        status: str = "is thinking…",
        assistant: AssistantPane | None = None,
        sessions: AgentSessions | None = None,
        sleep: Sleep = asyncio.sleep,
        stream: StreamMode = "native",
        stream_interval: float = 1.0,
    ) -> None:
        self._client = client
        self._signs = ProgressSigns(
            client,
            reaction=reaction,
            status=status,
            assistant=assistant if assistant is not None else AssistantPane(client),
            sessions=sessions,
        )
        self._sleep = sleep
        self._stream = stream
        self._stream_interval = stream_interval
        self._live = OpenMessages()

    @property
    def stream_mode(self) -> StreamMode:
        """How answers stream now ("off" after Slack refused streaming)."""
        return self._stream

    def live(self, route: ReplyRoute, turn_id: str) -> SlackLive | None:
        if self._stream == "off" or _channel(route) is None:
            return None
        return SlackLive(
            self._client,
            route,
            turn_id,
            mode=self._stream,
            interval=self._stream_interval,
            visible=self._signs.shown(route),
            messages=self._live,
            refused=self._refused,
        )

    def _refused(self, reason: str) -> None:
        if self._stream != "off":
            log.warning("slack_stream_refused", mode=self._stream, reason=reason)
            self._stream = "off"

    async def finish(self, part: OutboxPart, first: str | None) -> str:
        """End a message a stream opened with the part's final text (or remove it)."""
        channel, ts = _channel(part.route), part.platform_id
        if channel is None or ts is None:
            raise PartFailed("route has no Slack channel")
        if ts in self._live.streaming or ts not in self._live.opened:  # maybe still streaming
            await self._stop(channel, ts)
        if not part.text:
            await self._delete(channel, ts)
            self._live.opened.discard(ts)
            return ts
        text, tag = part.text, metadata(part.part_id)
        blocks = table_blocks(text)  # None: the text alone, as the stream showed it
        try:
            await self._with_retries(
                "chat.update",
                lambda: self._client.chat_update(
                    channel=channel, ts=ts, text=text, metadata=tag, blocks=blocks
                ),
            )
        except _PostFailed as failure:
            if "message_not_found" in str(failure):  # removed meanwhile: post it anew
                return await self.post(replace(part, platform_id=None), first)
            if failure.final:
                raise PartFailed(str(failure)) from None
            raise
        self._live.opened.discard(ts)
        return ts

    async def _stop(self, channel: str, ts: str) -> None:
        try:
            await self._with_retries(
                "chat.stopStream", lambda: self._client.chat_stopStream(channel=channel, ts=ts)
            )
        except _PostFailed as failure:  # not streaming (any more), or no such method: fine
            log.debug("slack_stream_stop_skipped", reason=str(failure))
        self._live.streaming.discard(ts)

    async def _delete(self, channel: str, ts: str) -> None:
        try:
            await self._with_retries(
                "chat.delete", lambda: self._client.chat_delete(channel=channel, ts=ts)
            )
        except _PostFailed as failure:
            if "message_not_found" not in str(failure):
                raise PartFailed(str(failure)) from None

    def route_to(self, destination: str) -> ReplyRoute:
        """A top-level route to a channel id (scheduled posts)."""
        return ReplyRoute(platform=PLATFORM, values={"channel": destination, "thread_ts": None})

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return split_message(to_mrkdwn(text), MESSAGE_BUDGET)

    async def post(self, part: OutboxPart, first: str | None) -> str:
        """Post one outbox part: part 0 where the route says, the rest in the thread under it."""
        channel = _channel(part.route)
        if channel is None:
            raise PartFailed("route has no Slack channel")
        thread = part.route.values.get("thread_ts") or (first if part.index else None)

        async def landed() -> str | None:
            try:
                return await self._find(part, first)
            except CALL_ERRORS as exc:  # cannot tell: posting again might post it twice
                raise _PostFailed(f"cannot look for the part ({error_code(exc)})") from None

        try:
            ts = await self._post(channel, part.text, thread, part_id=part.part_id, landed=landed)
        except _PostFailed as failure:
            if failure.final:
                raise PartFailed(str(failure)) from None
            raise
        if ts is None:
            raise PartFailed("chat.postMessage answered without a ts")
        return ts

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        """The ts of a post of this part already in Slack (matched by its metadata), or None
        (also when Slack cannot be asked: after a restart a duplicate beats a lost part)."""
        try:
            return await self._find(part, first)
        except CALL_ERRORS as exc:
            log.warning("slack_find_failed", error=error_code(exc))
            return None

    async def _find(self, part: OutboxPart, first: str | None) -> str | None:
        channel = _channel(part.route)
        thread = part.route.values.get("thread_ts") or (first if part.index else None)
        if channel is None or (part.index and thread is None):
            return None
        arguments: dict[str, Any] = {"channel": channel, "include_all_metadata": True}
        if thread:
            response = await self._client.conversations_replies(
                ts=thread, limit=FIND_LIMIT, **arguments
            )
        else:
            response = await self._client.conversations_history(limit=FIND_LIMIT, **arguments)
        for message in response.get("messages") or []:
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if metadata.get("event_type") == PART_EVENT and payload.get("part_id") == part.part_id:
                return str(message["ts"])
        return None

    async def _post(
        self,
        channel: str,
        text: str,
        thread: str | None,
        *,
        part_id: str | None = None,
        landed: Callable[[], Awaitable[str | None]] | None = None,
    ) -> str | None:
        arguments: dict[str, Any] = {"channel": channel, "text": text}
        blocks = table_blocks(text)
        if blocks is not None:
            arguments["blocks"] = blocks
        if thread:
            arguments["thread_ts"] = thread
        if part_id is not None:
            arguments["metadata"] = metadata(part_id)
        response = await self._with_retries(
            "chat.postMessage", lambda: self._client.chat_postMessage(**arguments), landed
        )
        ts = response if isinstance(response, str) else response.get("ts")
        return ts if isinstance(ts, str) else None

    async def _with_retries(
        self,
        method: str,
        call: Callable[[], Awaitable[AsyncSlackResponse]],
        landed: Callable[[], Awaitable[str | None]] | None = None,
    ) -> AsyncSlackResponse | str:
        """The call's response, retried on rate limits and passing failures. With `landed`, a
        retry after a failure that may have followed Slack's taking the call first asks
        `landed()`; a ts it finds is returned instead of calling again."""
        backoff = BACKOFF
        unsure = False
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                if unsure and landed is not None and (found := await landed()) is not None:
                    log.info("slack_post_found", method=method, attempt=attempt)
                    return found
                return await call()
            except SlackApiError as exc:
                wait = _retry_after(exc)
                if wait is None and not _is_transient(exc):
                    raise _PostFailed(f"{method} failed: {error_code(exc)}", final=True) from None
                reason = error_code(exc)
                unsure = unsure or wait is None  # a 429 refused the call; a 5xx may not have
            except CALL_ERRORS as exc:
                wait, reason, unsure = None, error_code(exc), True
            except _PostFailed as failure:  # `landed` could not look: ask again next time
                wait, reason = None, str(failure)
            if attempt == MAX_ATTEMPTS:
                break
            delay = min(MAX_WAIT, wait if wait is not None else backoff)
            backoff *= 2
            log.info("slack_retry", method=method, attempt=attempt, wait=delay, reason=reason)
            await self._sleep(delay)
        raise _PostFailed(
            f"{method} failed after {MAX_ATTEMPTS} attempts ({reason})", retry_after=wait or 0.0
        )

    def working(self, route: ReplyRoute) -> contextlib.AbstractAsyncContextManager[None]:
        return self._signs.working(route)

    async def aclose(self) -> None:
        """Let progress signs finish removing themselves."""
        await self._signs.aclose()


class _PostFailed(PartDelayed):
    """A part could not be posted; the message names the API method and Slack's error. `final`:
    Slack refused it (posting it again would fail alike), rather than failing for a while; else
    `retry_after` is the last Retry-After Slack gave (0 when it gave none)."""

    def __init__(self, message: str, *, final: bool = False, retry_after: float = 0.0) -> None:
        super().__init__(message, retry_after)
        self.final = final


def _channel(route: ReplyRoute) -> str | None:
    channel = route.values.get("channel")
    return channel if isinstance(channel, str) and channel else None


def _is_transient(exc: SlackApiError) -> bool:
    status = getattr(exc.response, "status_code", 0) or 0
    return status >= 500 or error_code(exc) in TRANSIENT_ERRORS


def _retry_after(exc: SlackApiError) -> float | None:
    response = exc.response
    if response is None or response.status_code != 429:
        return None
    return retry_after(response)
