"""Slack's assistant pane (Agents & AI apps): its events read (pure: `read_assistant_thread`,
`thread_title`), which DM threads are assistant threads, what the person in each has open beside
it, and the pane's own Web API calls (suggested prompts, the thread's status and its title).

What the threads' events said is kept in memory, bounded (the least recently used thread goes
first): after a restart, or on another replica, a thread is known again from its next message
(Slack marks those) and its next context change. A stored turn keeps what it was taken in with,
in its lookups.

A method Slack refuses for the app (it lacks `assistant:write`, the assistant feature is off) is
logged once as a warning naming the fix and not called again until the next start; the turn goes
on without it. A call refused for its thread alone, or failing for a while, is logged and not
retried: none of them is worth delaying an answer.
"""

from __future__ import annotations

import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.events import Skip, ts_value

log = structlog.get_logger(__name__)

MAX_THREADS = 10_000
# Failures that pass, and refusals of one call (its thread, its arguments); any other error is
# Slack refusing the method to this app, and it would refuse it again.
_PASSING = frozenset({"internal_error", "fatal_error", "service_unavailable", "ratelimited"})
_THIS_CALL = frozenset(
    {"channel_not_found", "invalid_thread_ts", "message_not_found", "invalid_arguments"}
)
FIX = (
    "Fix: turn on 'Agents & AI Apps' in the app's settings (or recreate the app from "
    "deploy/slack-app-manifest.yaml), make sure the bot token has the assistant:write scope, "
    "and reinstall the app."
)


# --- the pane's events (pure) -----------------------------------------------------------------

ASSISTANT_EVENTS = frozenset({"assistant_thread_started", "assistant_thread_context_changed"})
TITLE_MAX_CHARS = 60


@dataclass(frozen=True, slots=True)
class AssistantThread:
    """An assistant thread as its `assistant_thread_started` or `_context_changed` event says:
    the DM and thread it lives in, the person, and the channel they have open beside it (None when
    Slack names none). All of it is route-side: ids, never shown to the model."""

    event_type: str
    team: str
    channel: str
    thread_ts: str
    user: str
    viewing: str | None


def read_assistant_thread(body: Mapping[str, Any]) -> AssistantThread | Skip:
    event = body.get("event")
    if not isinstance(event, Mapping) or event.get("type") not in ASSISTANT_EVENTS:
        return Skip("not an assistant thread event")
    thread = event.get("assistant_thread")
    if not isinstance(thread, Mapping):
        return Skip("malformed: no assistant_thread object")
    context = thread.get("context")
    context = context if isinstance(context, Mapping) else {}
    channel, thread_ts = (
        _text(thread.get("channel_id")),
        _text(thread.get("thread_ts")),
    )
    user = _text(thread.get("user_id"))
    team = _text(body.get("team_id") or context.get("team_id"))
    if channel is None or thread_ts is None or user is None or team is None:
        return Skip("malformed: assistant thread without channel, thread, user or team")
    if ts_value(thread_ts) is None:
        return Skip(f"malformed: thread_ts {thread_ts!r} is not a Slack timestamp")
    return AssistantThread(
        event_type=str(event["type"]),
        team=team,
        channel=channel,
        thread_ts=thread_ts,
        user=user,
        viewing=_text(context.get("channel_id")),
    )


def thread_title(text: str) -> str | None:
    """An assistant thread's title from the person's first message: one line of printable
    characters (controls, format characters and line breaks become spaces, runs of spaces one), at
    most TITLE_MAX_CHARS, cut at a word with an ellipsis; None when nothing printable is left."""
    spaced = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    line = " ".join(spaced.split())
    if len(line) <= TITLE_MAX_CHARS:
        return line or None
    cut = line[: TITLE_MAX_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_MAX_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(slots=True)
class _Thread:
    viewing: str | None  # the channel id the person has open beside the thread
    titled: bool  # its title was set (or is not ours to set)


class AssistantThreads:
    """The assistant threads this process has heard of, by (DM channel, thread ts)."""

    def __init__(self, limit: int = MAX_THREADS) -> None:
        self._limit = limit
        self._threads: OrderedDict[tuple[str, str], _Thread] = OrderedDict()

    def started(self, thread: AssistantThread) -> None:
        """A new thread: its first message will title it."""
        self._put((thread.channel, thread.thread_ts), _Thread(thread.viewing, titled=False))

    def moved(self, thread: AssistantThread) -> None:
        """The person opened another channel while the thread was visible."""
        found = self._threads.get((thread.channel, thread.thread_ts))
        titled = found.titled if found is not None else True  # not seen started: not ours
        self._put((thread.channel, thread.thread_ts), _Thread(thread.viewing, titled))

    def known(self, channel: str, thread_ts: str) -> bool:
        return (channel, thread_ts) in self._threads

    def viewing(self, channel: str, thread_ts: str) -> str | None:
        found = self._threads.get((channel, thread_ts))
        return found.viewing if found is not None else None

    def take_title(self, channel: str, thread_ts: str) -> bool:
        """True once per thread seen started: its first message names it."""
        found = self._threads.get((channel, thread_ts))
        if found is None or found.titled:
            return False
        found.titled = True
        return True

    def _put(self, key: tuple[str, str], thread: _Thread) -> None:
        self._threads[key] = thread
        self._threads.move_to_end(key)
        while len(self._threads) > self._limit:
            self._threads.popitem(last=False)


class AssistantPane:
    """The assistant.threads.* calls, each answering whether Slack took it."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._refused: set[str] = set()  # methods Slack refuses this app: not called again

    async def suggest(
        self, channel: str, thread_ts: str | None, prompts: list[dict[str, str]], title: str
    ) -> bool:
        """Offer `prompts` in an assistant thread, or (no thread: agent messaging) at the top
        of the app's Messages tab."""
        arguments: dict[str, Any] = {"title": title} if title else {}
        if thread_ts is not None:
            arguments["thread_ts"] = thread_ts
        return await self.call(
            "assistant.threads.setSuggestedPrompts",
            self._client.assistant_threads_setSuggestedPrompts,
            channel_id=channel,
            prompts=prompts,
            **arguments,
        )

    async def status(self, channel: str, thread_ts: str, status: str) -> bool:
        """Show `status` under the thread ("" clears it)."""
        return await self.call(
            "assistant.threads.setStatus",
            self._client.assistant_threads_setStatus,
            channel_id=channel,
            thread_ts=thread_ts,
            status=status,
        )

    async def title(self, channel: str, thread_ts: str, title: str) -> bool:
        return await self.call(
            "assistant.threads.setTitle",
            self._client.assistant_threads_setTitle,
            channel_id=channel,
            thread_ts=thread_ts,
            title=title,
        )

    async def call(
        self, method: str, call: Callable[..., Awaitable[Any]], **arguments: Any
    ) -> bool:
        """Call `method` unless Slack refused it to this app before; whether Slack took it."""
        if method in self._refused:
            return False
        try:
            await call(**arguments)
        except SlackApiError as exc:
            code = error_code(exc)
            status = getattr(exc.response, "status_code", 0) or 0
            if code in _PASSING or status >= 500 or code in _THIS_CALL:
                log.info("slack_assistant_call_failed", method=method, error=code)
            else:
                self._refused.add(method)
                log.warning("slack_assistant_refused", method=method, error=code, fix=FIX)
            return False
        except CALL_ERRORS as exc:
            log.info("slack_assistant_call_failed", method=method, error=error_code(exc))
            return False
        return True
