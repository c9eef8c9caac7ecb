"""Slack messages to turn facts (pure): what starts a turn, its conversation key, its hidden route,
the request stored before the ack, and which earlier messages are its context.

An event is stored before it is acknowledged, and Slack wants the ack within 3 s, so the stored
request (`pending_request`) holds only what the event itself says; what needs the Web API (names,
the surface's name, the preceding messages) is named when its turn runs, from the request's
`Lookups` (`channels.slack.directory`). Names and markup to model-visible text are
`channels.slack.names`; the assistant pane's own events are read in `channels.slack.assistant`.

Everything here is dict in, value out, tested against recorded payloads.

Platform user ids and thread timestamps never leave this module except inside a `ReplyRoute`,
`Lookups` or `TurnRequest.person`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.ports.memory import Departure
from bot.turns import (
    ConversationKind,
    Lookups,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    TurnRequest,
    Viewing,
)
from channels.slack.files import attachment, declared_files, file_url
from channels.slack.names import UNKNOWN_PERSON, build_surface, plain_text, surface_kind

PLATFORM = "slack"
MAX_PRECEDING = 30
# Message subtypes that are still a person writing something new; every other subtype (edits,
# deletions, joins, topic changes, bot posts...) starts nothing.
PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
_NEW_MESSAGE_SUBTYPES = PERSON_SUBTYPES | {"bot_message"}


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """The message that may start a turn, as far as its event says."""

    event_id: str
    event_type: str  # "app_mention" or "message"
    team: str
    channel: str
    channel_type: str | None
    user: str
    text: str
    ts: str
    thread_ts: str | None
    bot_name: str | None = None  # set when another bot wrote it
    files: tuple[Mapping[str, Any], ...] = ()  # Slack file objects shared with the message
    assistant: bool = False  # written in an assistant thread (Slack's assistant pane)
    # Agent messaging: every message is answered in its thread (a DM's top-level message opens
    # one), and each thread is an agent session with Slack's stop button.
    session: bool = False

    @property
    def in_thread(self) -> bool:
        return in_thread(self.ts, self.thread_ts)

    @property
    def assistant_thread(self) -> str | None:
        """The thread's ts when this was written in an assistant thread (always a DM thread)."""
        return self.thread_ts if self.assistant and self.is_dm and self.in_thread else None

    @property
    def is_dm(self) -> bool:
        return is_dm(self.channel_type, self.channel)


def is_dm(channel_type: str | None, channel: str) -> bool:
    """Whether a conversation is a DM: by the event's channel_type, else the id's prefix."""
    if channel_type is not None:
        return channel_type == "im"
    return channel.startswith("D")


def in_thread(ts: str, thread_ts: str | None) -> bool:
    """Whether a message is a reply in a thread (a thread's parent is not)."""
    return thread_ts is not None and thread_ts != ts


@dataclass(frozen=True, slots=True)
class Skip:
    """Why an event starts no turn (logged, never answered)."""

    reason: str


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in this workspace (from auth.test), to recognise its own messages."""

    user_id: str | None
    bot_id: str | None


def read_event(
    body: Mapping[str, Any], bot: BotIdentity, *, ignore_other_bots: bool = True
) -> SlackMessage | Skip:
    """Decide whether an Events API `event_callback` body starts a turn."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return Skip("malformed: no event object")
    reason = _not_a_trigger(event, bot, ignore_other_bots)
    if reason is not None:
        return Skip(reason)
    message = _message(body, event)
    if isinstance(message, Skip) or message.event_type == "app_mention" or message.is_dm:
        return message
    return Skip("channel message without a mention")


# Slackbot's own messages carry this user id and no bot_id.
SLACKBOT = "USLACKBOT"


def read_departure(body: Mapping[str, Any], received_at: datetime) -> Departure | Skip:
    """A `member_left_channel` event as the person who left and the channel they left, as of
    `received_at` (the host's clock, which memory's times follow too, not Slack's)."""
    event = body.get("event")
    if not isinstance(event, Mapping) or event.get("type") != "member_left_channel":
        return Skip("not a member_left_channel event")
    channel = _str_or_none(event.get("channel"))
    team = _str_or_none(body.get("team_id") or event.get("team"))
    user = _str_or_none(event.get("user"))
    if channel is None or team is None or user is None:
        return Skip("malformed: member_left_channel without channel, team or user")
    return Departure(PLATFORM, channel, person_id(team, user), received_at)


def _not_a_trigger(
    event: Mapping[str, Any], bot: BotIdentity, ignore_other_bots: bool
) -> str | None:
    kind, subtype = event.get("type"), event.get("subtype")
    if kind not in ("app_mention", "message"):
        return f"not a trigger: event type {kind!r}"
    if subtype not in _NEW_MESSAGE_SUBTYPES:
        return f"not a new message: subtype {subtype!r}"
    if event.get("edited") is not None:
        return "not a new message: edited"
    if _is_own(event, bot):
        return "own message"
    if event.get("user") == SLACKBOT:  # reminders, join notices: never a person asking
        return "Slackbot"
    if ignore_other_bots and _other_bot_name(event) is not None:
        return "another bot"
    return None


def _message(body: Mapping[str, Any], event: Mapping[str, Any]) -> SlackMessage | Skip:
    channel = _str_or_none(event.get("channel"))
    ts = _str_or_none(event.get("ts"))
    team = _str_or_none(body.get("team_id") or event.get("team"))
    user = _str_or_none(event.get("user") or event.get("bot_id"))
    if channel is None or ts is None or team is None or user is None:
        named = (("channel", channel), ("ts", ts), ("team_id", team), ("user", user))
        return Skip(f"malformed: missing {', '.join(n for n, v in named if v is None)}")
    if ts_value(ts) is None:
        return Skip(f"malformed: ts {ts!r} is not a Slack timestamp")
    return SlackMessage(
        event_id=str(body.get("event_id") or f"{channel}:{ts}"),
        event_type=str(event.get("type")),
        team=team,
        channel=channel,
        channel_type=_str_or_none(event.get("channel_type")),
        user=user,
        text=str(event.get("text") or ""),
        ts=ts,
        thread_ts=_str_or_none(event.get("thread_ts")),
        bot_name=_other_bot_name(event),
        files=tuple(declared_files(event)),
        # Slack marks each message of an assistant thread with an `assistant_thread` object.
        assistant=isinstance(event.get("assistant_thread"), Mapping),
    )


def _is_own(event: Mapping[str, Any], bot: BotIdentity) -> bool:
    return bool(
        (bot.user_id and event.get("user") == bot.user_id)
        or (bot.bot_id and event.get("bot_id") == bot.bot_id)
    )


def _other_bot_name(event: Mapping[str, Any]) -> str | None:
    if not event.get("bot_id") and event.get("subtype") != "bot_message":
        return None
    profile = event.get("bot_profile")
    name = profile.get("name") if isinstance(profile, Mapping) else None
    return str(name or event.get("username") or "a bot")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# --- keys and routes ----------------------------------------------------------------------------


def conversation_key(message: SlackMessage) -> str:
    """Channel threads are conversations; a DM's top level is one; a DM thread is its own."""
    base = f"{PLATFORM}:{message.team}:{message.channel}"
    if message.is_dm and not message.session:
        return f"{base}:{message.thread_ts}" if message.in_thread else base
    return f"{base}:{message.thread_ts or message.ts}"


def session_key(team: str, channel: str, thread_ts: str) -> str:
    """The conversation an agent session (one thread) is: what `conversation_key` gives for
    its messages."""
    return f"{PLATFORM}:{team}:{channel}:{thread_ts}"


def reply_thread(message: SlackMessage) -> str | None:
    """Where the first part of the answer goes: the mention's thread, or a DM's top level."""
    if message.is_dm and not message.session:
        return message.thread_ts if message.in_thread else None
    return message.thread_ts or message.ts


def message_key(message: SlackMessage) -> str:
    """One id per Slack message, shared by its `message` and `app_mention` deliveries."""
    return f"message:{message.channel}:{message.ts}"


def route_for(message: SlackMessage) -> ReplyRoute:
    values: dict[str, Any] = {
        "team": message.team,
        "channel": message.channel,
        "thread_ts": reply_thread(message),
        "message_ts": message.ts,
        "user": message.user,
    }
    if message.files:  # file URLs are route-side: the host fetches "attachment N" through us
        values["files"] = [file_url(f) for f in message.files]
    if message.assistant_thread is not None:
        values["assistant"] = True  # the deliverer shows the thread status, not a reaction
    if message.session:
        values["session"] = True  # the deliverer shows the agent session's status
    return ReplyRoute(platform=PLATFORM, values=values)


def person_for(message: SlackMessage) -> str:
    return person_id(message.team, message.user)


def person_id(team: str, user: str) -> str:
    """Who a person is across conversations (memory attribution, rates): team and user id.
    `bot preview` builds it with this function too."""
    return f"{PLATFORM}:{team}:{user}"


def build_request(
    message: SlackMessage,
    *,
    text: str,
    speaker: Speaker,
    surface: Surface,
    preceding: Sequence[PrecedingMessage],
    received_at: datetime,
    turn_id: str,
    viewing: Viewing | None = None,
) -> TurnRequest:
    return TurnRequest(
        conversation_key=conversation_key(message),
        kind=ConversationKind.PUSH,
        channel=PLATFORM,
        text=text,
        received_at=received_at,
        turn_id=turn_id,
        speaker=speaker,
        surface=surface,
        preceding=tuple(preceding),
        attachments=tuple(attachment(f) for f in message.files),
        route=route_for(message),
        person=person_for(message),
        viewing=viewing,
    )


# --- stored before the ack, named at turn time --------------------------------------------------


def pending_request(
    message: SlackMessage,
    bot: BotIdentity,
    *,
    received_at: datetime,
    turn_id: str,
    viewing: str | None = None,
) -> TurnRequest:
    """The request as stored before the ack: readable as it is (a mention of someone shows as
    `@someone`, the speaker is "someone", the surface is named by kind only, no preceding
    messages), with the `Lookups` its turn names it by (`SlackDirectory.names`). `viewing`: the
    channel the person has open beside an assistant thread."""
    kind = surface_kind(None, message.channel_type, message.channel)
    request = build_request(
        message,
        text=plain_text(message.text, {}, bot.user_id),
        speaker=Speaker(name=message.bot_name or UNKNOWN_PERSON),
        surface=build_surface(message.channel, kind, None, None),
        preceding=(),
        received_at=received_at,
        turn_id=turn_id,
    )
    lookups = Lookups(
        speaker=message.user,
        surface=message.channel,
        text=message.text,
        message=message.ts,
        thread=message.thread_ts,
        surface_type=message.channel_type,
        speaker_name=message.bot_name,
        viewing=viewing,
        bot_user=bot.user_id,
        bot_author=bot.bot_id,
    )
    return replace(request, lookups=lookups)


TITLE = "title"  # route key: an agent session's title, from its first message


def with_title(request: TurnRequest, title: str | None) -> TurnRequest:
    """The request with the title its new agent session gets (route-side: Slack shows it, the
    model never sees it)."""
    route = request.route
    if title is None or route is None:
        return request
    return replace(request, route=ReplyRoute(route.platform, {**route.values, TITLE: title}))


# --- preceding messages -------------------------------------------------------------------------


def select_preceding(
    messages: Iterable[Mapping[str, Any]], trigger_ts: str, bot: BotIdentity
) -> list[Mapping[str, Any]]:
    """What people said before the trigger since the bot's last turn there, oldest first.

    `messages` is a page of conversations.replies or conversations.history in any order. The
    bot's last turn is its own latest message or the latest message that mentioned it (that
    message was a turn of its own, and its answer may not have been posted yet).
    """
    selected: list[Mapping[str, Any]] = []
    for item in _earlier(messages, trigger_ts):
        if _ends_a_turn(item, bot):
            selected.clear()
            continue
        if item.get("subtype") in _NEW_MESSAGE_SUBTYPES:
            selected.append(item)
    return selected[-MAX_PRECEDING:]


def last_turn(
    messages: Iterable[Mapping[str, Any]], trigger_ts: str, bot: BotIdentity
) -> str | None:
    """The ts of the bot's last turn before the trigger in this page (see `select_preceding`),
    or None when the page has none: nothing at or before it is ever preceding again."""
    found = [item for item in _earlier(messages, trigger_ts) if _ends_a_turn(item, bot)]
    return str(found[-1]["ts"]) if found else None


def _earlier(messages: Iterable[Mapping[str, Any]], trigger_ts: str) -> list[Mapping[str, Any]]:
    """The messages before the trigger, oldest first."""
    before = ts_value(trigger_ts) or 0.0
    stamped = [(ts, m) for m in messages if (ts := _ts(m)) is not None and ts < before]
    return [m for _, m in sorted(stamped, key=lambda pair: pair[0])]


def _ends_a_turn(item: Mapping[str, Any], bot: BotIdentity) -> bool:
    """The bot's own message, or one that mentioned it (a turn of its own)."""
    mention = f"<@{bot.user_id}" if bot.user_id else None
    return _is_own(item, bot) or bool(mention and mention in str(item.get("text") or ""))


def preceding_message(item: Mapping[str, Any], speaker: Speaker, text: str) -> PrecedingMessage:
    return PrecedingMessage(
        at=datetime.fromtimestamp(_ts(item) or 0.0, tz=UTC),
        name=speaker.name,
        handle=speaker.handle,
        text=text,
    )


def author_of(item: Mapping[str, Any]) -> str | None:
    """The user id behind a history message; None for a bot post without a user."""
    user = item.get("user")
    return user if isinstance(user, str) and user else None


def bot_speaker(item: Mapping[str, Any]) -> Speaker:
    return Speaker(name=_other_bot_name(item) or "a bot")


def _ts(item: Mapping[str, Any]) -> float | None:
    value = item.get("ts")
    return ts_value(value) if isinstance(value, str) else None


def ts_value(ts: str) -> float | None:
    try:
        return float(ts)
    except ValueError:
        return None
