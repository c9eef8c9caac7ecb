"""Slack's agent messaging (`[slack] messaging = "agent"`): the agent session of each thread and
Slack's stop button.

A session is one thread (in a DM or a channel). While a turn works there, the thread's session is
`processing`, which makes Slack show the person a stop button; when the turn has ended (answered,
failed or stopped) it is `active` again. Slack does not move a session out of `processing` by
itself, not even after the stop button: the app does (docs.slack.dev, agent_session_stopped).
A new session is titled after its first message (`agents.sessions.rename`).

The stop button reaches the app as an `agent_session_stopped` event naming the channel and the
thread (and the streaming messages Slack already stopped); `read_stop` reads it (pure), and
`SessionEvents` cancels that session's running turn. Opening the app's Messages tab shows the
suggested prompts at its top (no model call).

The methods are called through slack-sdk's `agents_sessions_setStatus` / `_rename`. A refusal
follows `channels.slack.assistant`'s rule (a method Slack refuses the app is warned about once and
not called again; the turn goes on with the reaction as its progress sign), and the warning Slack
adds while the app is not subscribed to `agent_session_stopped` (the person then sees no stop
button) is logged once with the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import IntakeUnavailable
from bot.ports.intake import TurnSink
from channels.slack.assistant import AssistantPane
from channels.slack.background import Background
from channels.slack.events import Skip, session_key
from channels.slack.intake import INBOX_SOURCE
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

Status = Literal["processing", "active", "closed"]
STOP_EVENT = "agent_session_stopped"
NOT_SUBSCRIBED = "missing_agent_session_stopped_event_subscription"
STOP_FIX = (
    "Fix: subscribe the app to the agent_session_stopped bot event (deploy/slack-app-manifest.yaml "
    "lists it) and reinstall it, so people see a stop button while the agent works."
)


@dataclass(frozen=True, slots=True)
class Stop:
    """Someone pressed the stop button of the session in this thread."""

    event_id: str
    team: str
    channel: str
    thread_ts: str
    user: str | None


def read_stop(body: Mapping[str, Any]) -> Stop | Skip:
    """An `agent_session_stopped` event_callback body as the session it stops."""
    event = body.get("event")
    if not isinstance(event, Mapping) or event.get("type") != STOP_EVENT:
        return Skip(f"not an {STOP_EVENT} event")
    team, channel = _text(body.get("team_id") or event.get("team")), _text(event.get("channel"))
    thread = _text(event.get("thread_ts"))
    if team is None or channel is None or thread is None:
        return Skip(f"malformed: {STOP_EVENT} without team, channel or thread_ts")
    return Stop(
        event_id=str(body.get("event_id") or f"{channel}:{thread}:stop"),
        team=team,
        channel=channel,
        thread_ts=thread,
        user=_text(event.get("user")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class AgentSessions:
    """The agents.sessions.* calls, each answering whether Slack took it."""

    def __init__(self, client: AsyncWebClient, pane: AssistantPane) -> None:
        self._client = client
        self._pane = pane  # its refusal bookkeeping: a method refused is not called again
        self._warned = False

    async def status(self, channel: str, thread_ts: str, status: Status) -> bool:
        response: list[Any] = []

        async def set_status(**arguments: Any) -> Any:
            answer = await self._client.agents_sessions_setStatus(**arguments)
            response.append(answer)
            return answer

        done = await self._pane.call(
            "agents.sessions.setStatus",
            set_status,
            channel_id=channel,
            thread_ts=thread_ts,
            status=status,
        )
        warning = str(response[0].get("warning") or "") if response else ""
        if NOT_SUBSCRIBED in warning and not self._warned:
            self._warned = True
            log.warning("slack_stop_button_missing", warning=NOT_SUBSCRIBED, fix=STOP_FIX)
        return done

    async def rename(self, channel: str, thread_ts: str, title: str) -> bool:
        return await self._pane.call(
            "agents.sessions.rename",
            self._client.agents_sessions_rename,
            channel_id=channel,
            thread_ts=thread_ts,
            title=title,
        )


class SessionEvents:
    """The listeners agent messaging adds: the stop button, and the Messages tab opened."""

    def __init__(
        self,
        settings: SlackSettings,
        sink: Callable[[], TurnSink | None],
        pane: AssistantPane,
        background: Background,
    ) -> None:
        """`sink`: where stops go now (None before start and while stopping)."""
        self._settings = settings
        self._sink = sink
        self._pane = pane
        self._background = background

    def attach(self, app: AsyncApp) -> None:
        app.event(STOP_EVENT)(self._on_stop)
        app.event("app_home_opened")(self._on_home)

    async def _on_home(self, event: dict[str, Any]) -> None:
        """Someone opened the app's Messages tab: the suggested prompts go at its top (no model
        call). Opening the Home tab (or a tab without a name) does nothing."""
        channel, user = event.get("channel"), event.get("user")
        if event.get("tab") != "messages" or not isinstance(channel, str) or not channel:
            return
        users = self._settings.allowed_user_ids
        if users and user not in users:
            log.warning("slack_event_not_allowed", reason="messages tab", user=user)
            return
        prompts = [p.model_dump() for p in self._settings.assistant_prompts]
        if prompts:
            title = self._settings.assistant_prompts_title
            self._background.run(self._pane.suggest(channel, None, prompts, title))

    async def _on_stop(self, body: dict[str, Any]) -> None:
        """Slack's stop button: the running turn of that thread's session is cancelled (its
        conversation keeps a continuity account; the session goes back to active when the turn
        has ended)."""
        stop = read_stop(body)
        if isinstance(stop, Skip):
            log.debug("slack_event_skipped", reason=stop.reason, event_id=body.get("event_id"))
            return
        users = self._settings.allowed_user_ids
        if users and stop.user not in users:
            log.warning("slack_event_not_allowed", reason="stop", user=stop.user)
            return
        sink = self._sink()
        if sink is None:
            return
        try:  # a redelivered stop must not stop the thread's next turn
            first = await sink.note(source=INBOX_SOURCE, marks=[f"stop:{stop.event_id}"])
        except IntakeUnavailable:  # cannot remember it: stopping once more is the lesser harm
            first = True
        if not first:
            log.info("slack_session_stop_duplicate", event_id=stop.event_id)
            return
        key = session_key(stop.team, stop.channel, stop.thread_ts)
        stopped = await sink.cancel(key)
        log.info("slack_session_stop", conversation_key=key, stopped=stopped)
