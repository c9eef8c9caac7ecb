"""The progress sign a Slack turn shows while it works: an agent session's `processing` status
(`[slack] messaging = "agent"`), an assistant thread's status (`assistant.threads.setStatus`,
cleared at the end), elsewhere (or when Slack refuses those) a reaction on the triggering
message.

It is shown in the background so the turn never waits on it, and a failure there is only logged.
It comes off when the answer is posted, or as soon as the answer's stream shows its first text
(`shown`); an agent session stays `processing` while text streams, so its stop button stays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.turns import ReplyRoute
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.assistant import AssistantPane
from channels.slack.sessions import AgentSessions

log = structlog.get_logger(__name__)

MAX_WAIT = 60.0  # how long closing waits for signs still coming off


class ProgressSigns:
    """The signs of the turns under way, by (channel, triggering message ts)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        reaction: str,
        status: str,
        assistant: AssistantPane,
        sessions: AgentSessions | None,
    ) -> None:
        self._client = client
        self._reaction = reaction
        self._status = status
        self._assistant = assistant
        self._sessions = sessions
        self._sessions_turn: dict[tuple[str, str], asyncio.Event] = {}  # each session's latest
        self._signs: set[asyncio.Task[None]] = set()
        self._shown: dict[tuple[str, str], asyncio.Event] = {}  # progress signs to take down

    def shown(self, route: ReplyRoute) -> Callable[[], None]:
        """What a stream calls once it shows text: the route's sign comes off (not a session's)."""
        key = (str(route.values.get("channel")), str(route.values.get("message_ts")))

        def visible() -> None:
            sign = self._shown.get(key)
            if sign is not None:
                sign.set()

        return visible

    @contextlib.asynccontextmanager
    async def working(self, route: ReplyRoute) -> AsyncIterator[None]:
        channel, ts = route.values.get("channel"), route.values.get("message_ts")
        if not (isinstance(channel, str) and isinstance(ts, str)):
            yield
            return
        thread = route.values.get("thread_ts")
        status_in = thread if route.values.get("assistant") and isinstance(thread, str) else None
        session = thread if route.values.get("session") and isinstance(thread, str) else None
        done = asyncio.Event()
        if session is None:  # a session stays "processing" (its stop button) while text streams
            self._shown[(channel, ts)] = done  # a stream that shows text sets it early
        title = route.values.get("title")
        show = None
        if session:
            self._sessions_turn[(channel, session)] = done  # this turn is the session's latest
            show = self._show_session(channel, session, title, done)
        task = asyncio.create_task(self._show_working(channel, ts, status_in, done, show))
        self._signs.add(task)
        task.add_done_callback(self._signs.discard)
        try:
            yield
        finally:
            done.set()
            if self._shown.get((channel, ts)) is done:
                del self._shown[(channel, ts)]

    async def _show_session(
        self, channel: str, thread: str, title: object, done: asyncio.Event
    ) -> bool:
        """The agent session `processing` (titled, when its first message gave a title) until
        `done`, then `active` unless the session's next turn began meanwhile (a late `active`
        would hide its stop button); False when Slack refused the session (the reaction is
        shown)."""
        key, sessions = (channel, thread), self._sessions
        if sessions is None or not await sessions.status(channel, thread, "processing"):
            if self._sessions_turn.get(key) is done:
                del self._sessions_turn[key]
            return False
        if isinstance(title, str) and title:
            await sessions.rename(channel, thread, title)
        await done.wait()
        if self._sessions_turn.get(key) is not done:
            return True  # the session's next turn has begun: it stays processing
        del self._sessions_turn[key]
        await sessions.status(channel, thread, "active")
        return True

    async def _show_working(
        self,
        channel: str,
        ts: str,
        status_in: str | None,
        done: asyncio.Event,
        session: Coroutine[Any, Any, bool] | None = None,
    ) -> None:
        """The agent session's status when `session` shows it, else the thread's status when
        `status_in` names an assistant thread and Slack takes it, else the reaction; taken down
        once `done` is set."""
        if session is not None and await session:
            return
        if status_in is not None and await self._assistant.status(channel, status_in, self._status):
            await done.wait()
            await self._assistant.status(channel, status_in, "")
            return
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
