"""Slack's live answer messages (SPEC §7 streaming): one turn's `LiveSession`.

`native` streams with Slack's own methods: `chat.startStream` in the thread (the recipient's user
and team ids, which Slack asks for, come from the route and stay here), `chat.appendStream` with
the Markdown written since (made inert first: `channels.slack.neutral`), `chat.stopStream` when
the message is full. Slack requires a thread
for a stream, so an answer at a DM's top level is shown with edits instead. `edits` posts the
formatted text with `chat.postMessage` (carrying the part's metadata, so a restart can find it)
and `chat.update`s it. Either way delivery then finishes each message with its final part
(`SlackDeliverer.finish`).

A 429 becomes StreamBusy (its Retry-After); a refusal that no retry can change (the method
unknown or not enabled for the app, a missing scope) becomes StreamRefused, which the deliverer
turns into one warning and normal posts from then on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.errors import StreamBusy, StreamRefused
from bot.ports.delivery import LiveSession, LiveView, Step
from bot.turns import ReplyRoute
from channels.slack.api import error_code, retry_after
from channels.slack.neutral import stream_text

StreamMode = Literal["native", "edits", "off"]

MARKDOWN_LIMIT = 12_000  # chat.startStream / appendStream: markdown_text characters per call
TASK_TITLE_LIMIT = 256  # a task_update chunk's title, in characters (an assumed bound)
PART_EVENT = "bot_answer_part"  # the metadata event type every posted part carries
# Errors after which streaming cannot work until the app is changed: no retry helps.
REFUSALS = frozenset(
    {
        "unknown_method",
        "method_not_supported",
        "feature_not_enabled",
        "not_allowed_token_type",
        "missing_scope",
        "no_permission",
        "not_authed",
        "invalid_auth",
        "access_denied",
        "method_deprecated",
        "team_access_not_granted",
    }
)
FIX = (
    "Fix: turn on 'Agents & AI Apps' for the Slack app (it makes chat.startStream available) "
    'and reinstall it with the chat:write scope, or set [slack] stream = "edits" (or "off").'
)

# What `bot doctor` says of each mode.
MODES: dict[StreamMode, str] = {
    "native": "native: chat.startStream/appendStream/stopStream in threads (an edited post at a "
    "DM's top level). If Slack refuses them, answers are posted whole after one warning. " + FIX,
    "edits": "edits: a posted message updated about once a second (chat.update)",
    "off": "off: answers are posted when complete",
}


def metadata(part_id: str) -> dict[str, Any]:
    return {"event_type": PART_EVENT, "event_payload": {"part_id": part_id}}


class OpenMessages:
    """The live messages of this process, across turns (the deliverer's, shared with each turn's
    `SlackLive`): the ts of native streams not stopped yet, and of every message a stream opened
    that delivery has not finished."""

    def __init__(self) -> None:
        self.streaming: set[str] = set()
        self.opened: set[str] = set()


class SlackLive(LiveSession):
    """The live messages of one turn's answer on one Slack route."""

    def __init__(
        self,
        client: AsyncWebClient,
        route: ReplyRoute,
        turn_id: str,
        *,
        mode: StreamMode,
        interval: float,
        visible: Callable[[], None],
        messages: OpenMessages,
        refused: Callable[[str], None],
    ) -> None:
        """`visible`: called once text shows (the progress sign comes off); `refused`: what to
        tell the deliverer when Slack refuses streaming."""
        self._client = client
        self._values = route.values
        self._turn_id = turn_id
        self._mode = mode
        self._interval = interval
        self._visible = visible
        self._messages = messages
        self._refused = refused
        self._sent: dict[int, str] = {}  # Markdown a native stream was sent, by message index

    @property
    def interval(self) -> float:
        return self._interval

    async def open(self, index: int, first: str | None, view: LiveView) -> str | None:
        try:
            return await self._open(index, first, view)
        except StreamRefused as exc:
            self._refused(str(exc))
            raise

    async def _open(self, index: int, first: str | None, view: LiveView) -> str:
        channel = str(self._values["channel"])
        thread = self._values.get("thread_ts") or (first if index else None)
        if self._mode == "native" and thread:
            arguments = self._stream_arguments(str(thread))
            shown = stream_text(view.markdown)[:MARKDOWN_LIMIT]
            if shown:
                arguments["markdown_text"] = shown
            response = await _call("chat.startStream", self._client.chat_startStream(**arguments))
            self._sent[index] = shown
            ts = str(response["ts"])
            self._messages.streaming.add(ts)
        else:
            arguments = {"channel": channel, "text": view.formatted}
            if thread:
                arguments["thread_ts"] = thread
            arguments["metadata"] = metadata(f"{self._turn_id}.{index}")
            response = await _call("chat.postMessage", self._client.chat_postMessage(**arguments))
            ts = str(response["ts"])
        self._messages.opened.add(ts)
        self._visible()
        return ts

    async def show(self, index: int, platform_id: str | None, view: LiveView) -> None:
        if platform_id is None:
            return
        channel = str(self._values["channel"])
        sent = self._sent.get(index)
        if sent is None:
            update = self._client.chat_update(channel=channel, ts=platform_id, text=view.formatted)
            await _call("chat.update", update)
            return
        markdown = stream_text(view.markdown)
        if not markdown.startswith(sent) or len(markdown) == len(sent):
            return  # nothing new to append (the final text is set when the part is finished)
        more = markdown[len(sent) : len(sent) + MARKDOWN_LIMIT]
        append = self._client.chat_appendStream(channel=channel, ts=platform_id, markdown_text=more)
        await _call("chat.appendStream", append)
        self._sent[index] = sent + more

    async def steps(
        self, index: int, platform_id: str | None, first: str | None, steps: Sequence[Step]
    ) -> str | None:
        """Each tool call as a task in a native stream's timeline (`task_update` chunks): the
        stream is started for them when no text has opened it yet. Not in edits mode, nor where
        Slack gives no stream (a DM's top level)."""
        chunks = [_task_chunk(step) for step in steps]
        if platform_id is not None:
            if index not in self._sent:
                return None  # an edited post, not a native stream
            channel = str(self._values["channel"])
            append = self._client.chat_appendStream(channel=channel, ts=platform_id, chunks=chunks)
            await _call("chat.appendStream", append)
            return platform_id
        thread = self._values.get("thread_ts") or (first if index else None)
        if self._mode != "native" or not thread:
            return None
        arguments = self._stream_arguments(str(thread))
        arguments |= {"chunks": chunks, "task_display_mode": "timeline"}
        response = await _call("chat.startStream", self._client.chat_startStream(**arguments))
        ts = str(response["ts"])
        self._sent[index] = ""
        self._messages.streaming.add(ts)
        self._messages.opened.add(ts)
        self._visible()
        return ts

    def _stream_arguments(self, thread: str) -> dict[str, Any]:
        """chat.startStream's where: the thread, and its recipient where Slack asks for one."""
        arguments: dict[str, Any] = {"channel": str(self._values["channel"]), "thread_ts": thread}
        if self._values.get("user") and self._values.get("team"):
            arguments["recipient_user_id"] = self._values["user"]
            arguments["recipient_team_id"] = self._values["team"]
        return arguments

    async def seal(self, index: int, platform_id: str | None, view: LiveView) -> str | None:
        if platform_id is None:
            return None
        if index in self._sent:
            await self.show(index, platform_id, view)
            channel = str(self._values["channel"])
            stop = self._client.chat_stopStream(channel=channel, ts=platform_id)
            await _call("chat.stopStream", stop)
            self._messages.streaming.discard(platform_id)
        else:
            await self.show(index, platform_id, view)
        return platform_id


async def _call(method: str, call: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
    """One streaming call; Slack's refusals and rate limits as the stream's errors."""
    try:
        return await call
    except SlackApiError as exc:
        code = error_code(exc)
        response = exc.response
        if response is not None and response.status_code == 429:
            raise StreamBusy(f"{method} rate-limited", retry_after(response)) from None
        if code in REFUSALS:
            raise StreamRefused(f"{method} refused: {code}. {FIX}") from None
        raise


def _task_chunk(step: Step) -> dict[str, Any]:
    """A `task_update` chunk (slack_sdk's TaskUpdateChunk shape): the call's id, the tool's
    name as its title, and its status (`in_progress`, `complete` or `error`)."""
    title = " ".join(step.title.split())[:TASK_TITLE_LIMIT] or "tool"
    return {"type": "task_update", "id": step.id, "title": title, "status": step.status}
