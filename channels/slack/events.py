"""Slack payloads to turn facts (pure): what starts a turn, its conversation key, its hidden route,
the speaker, the surface, the preceding messages and the plain text the model reads.

An event is stored before it is acknowledged, and Slack wants the ack within 3 s, so the stored
request (`pending_request`) holds only what the event itself says; what needs the Web API (names,
the surface's name, the preceding messages) is looked up when its turn runs, from what
`pending_lookup` reads back out of the route.

Everything here is dict in, value out, tested against recorded payloads. The lookups that fill in
names (users.info, conversations.info, history) live in `channels.slack.directory`.

Platform user ids and thread timestamps never leave this module except inside a `ReplyRoute` or
`TurnRequest.person`: message text is rewritten so `<@U123>` becomes `@handle`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.ports.memory import Departure
from bot.turns import (
    ConversationKind,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
    Viewing,
)
from channels.slack.files import attachment, declared_files, file_url
from channels.slack.mrkdwn import unescape
from channels.slack.split import MESSAGE_BUDGET

PLATFORM = "slack"
MAX_PRECEDING = 30
# Message subtypes that are still a person writing something new; every other subtype (edits,
# deletions, joins, topic changes, bot posts...) starts nothing.
PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
_NEW_MESSAGE_SUBTYPES = PERSON_SUBTYPES | {"bot_message"}
UNKNOWN_PERSON = "someone"

_MARKUP = re.compile(r"<([^<>]*)>")
_SPACES = re.compile(r"[ \t]{2,}")


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
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def assistant_thread(self) -> str | None:
        """The thread's ts when this was written in an assistant thread (always a DM thread)."""
        return self.thread_ts if self.assistant and self.is_dm and self.in_thread else None

    @property
    def is_dm(self) -> bool:
        if self.channel_type is not None:
            return self.channel_type == "im"
        return self.channel.startswith("D")


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


# --- the assistant pane ----------------------------------------------------------------------

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
        _str_or_none(thread.get("channel_id")),
        _str_or_none(thread.get("thread_ts")),
    )
    user = _str_or_none(thread.get("user_id"))
    team = _str_or_none(body.get("team_id") or context.get("team_id"))
    if channel is None or thread_ts is None or user is None or team is None:
        return Skip("malformed: assistant thread without channel, thread, user or team")
    if _ts_value(thread_ts) is None:
        return Skip(f"malformed: thread_ts {thread_ts!r} is not a Slack timestamp")
    return AssistantThread(
        event_type=str(event["type"]),
        team=team,
        channel=channel,
        thread_ts=thread_ts,
        user=user,
        viewing=_str_or_none(context.get("channel_id")),
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
    if _ts_value(ts) is None:
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


# --- stored before the ack, completed at turn time -----------------------------------------------

LOOKUP = "lookup"  # route key: what the turn still has to look up, and from what


def pending_request(
    message: SlackMessage, bot: BotIdentity, *, received_at: datetime, turn_id: str
) -> TurnRequest:
    """The request as stored before the ack: readable as it is (a mention of someone shows as
    `@someone`, the speaker is "someone", the surface is named by kind only, no preceding
    messages), and complete once its turn has looked the names up (`pending_lookup`)."""
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
    lookup = {
        "text": message.text,
        "event_type": message.event_type,
        "channel_type": message.channel_type,
        "thread_ts": message.thread_ts,
        "bot_name": message.bot_name,
        "bot_user_id": bot.user_id,
        "bot_id": bot.bot_id,
        "session": message.session,
    }
    assert request.route is not None
    return replace(request, route=ReplyRoute(PLATFORM, {**request.route.values, LOOKUP: lookup}))


VIEWING = "viewing"  # route key: the channel the person has open beside an assistant thread


def with_viewing(request: TurnRequest, channel: str | None) -> TurnRequest:
    """The request with the channel its person has open beside the assistant thread (route-side:
    the id is never shown; the turn names it when it looks the names up)."""
    route = request.route
    if channel is None or route is None:
        return request
    return replace(request, route=ReplyRoute(route.platform, {**route.values, VIEWING: channel}))


TITLE = "title"  # route key: an agent session's title, from its first message


def with_title(request: TurnRequest, title: str | None) -> TurnRequest:
    """The request with the title its new agent session gets (route-side: Slack shows it, the
    model never sees it)."""
    route = request.route
    if title is None or route is None:
        return request
    return replace(request, route=ReplyRoute(route.platform, {**route.values, TITLE: title}))


def viewed_channel(request: TurnRequest) -> str | None:
    """The channel id `with_viewing` put in the request's route, if any."""
    route = request.route
    return _str_or_none(route.values.get(VIEWING)) if route is not None else None


def viewing(channel: str, info: Mapping[str, Any] | None) -> Viewing:
    """The open channel as the model may know it: its kind and, for a channel, its name (from
    conversations.info; unnamed when the bot cannot see it). Never its id."""
    kind = surface_kind(info, None, channel)
    name = _first_text(info.get("name")) if info and kind is not SurfaceKind.DM else None
    return Viewing(kind=kind, name=name)


def pending_lookup(request: TurnRequest) -> tuple[SlackMessage, BotIdentity] | None:
    """The message and bot identity a stored request still has to look names up for; None when
    there is nothing to look up (or the route is not one `pending_request` wrote)."""
    route = request.route
    lookup = route.values.get(LOOKUP) if route is not None else None
    if route is None or route.platform != PLATFORM or not isinstance(lookup, Mapping):
        return None
    values = route.values
    team, channel = _str_or_none(values.get("team")), _str_or_none(values.get("channel"))
    user, ts = _str_or_none(values.get("user")), _str_or_none(values.get("message_ts"))
    if team is None or channel is None or user is None or ts is None:
        return None
    message = SlackMessage(
        event_id="",
        event_type=str(lookup.get("event_type") or "message"),
        team=team,
        channel=channel,
        channel_type=_str_or_none(lookup.get("channel_type")),
        user=user,
        text=str(lookup.get("text") or ""),
        ts=ts,
        thread_ts=_str_or_none(lookup.get("thread_ts")),
        bot_name=_str_or_none(lookup.get("bot_name")),
        session=lookup.get("session") is True,
    )
    bot = BotIdentity(_str_or_none(lookup.get("bot_user_id")), _str_or_none(lookup.get("bot_id")))
    return message, bot


def looked_up(request: TurnRequest, found: TurnRequest) -> TurnRequest:
    """`found` (built from the looked-up names) with the stored request's identity, files and
    route, minus what was left to look up."""
    route = request.route
    assert route is not None
    values = {key: value for key, value in route.values.items() if key != LOOKUP}
    return replace(
        found,
        turn_id=request.turn_id,
        received_at=request.received_at,
        attachments=request.attachments,
        route=ReplyRoute(route.platform, values),
    )


# --- speaker and surface ------------------------------------------------------------------------


def speaker_from_user(user: Mapping[str, Any] | None) -> Speaker:
    """A `users.info` user to a Speaker: real name (else display name), and the @handle."""
    if not user:
        return Speaker(name=UNKNOWN_PERSON)
    profile = user.get("profile") if isinstance(user.get("profile"), Mapping) else {}
    assert isinstance(profile, Mapping)
    handle = _first_text(profile.get("display_name"), user.get("name"))
    name = _first_text(profile.get("real_name"), user.get("real_name"), handle) or UNKNOWN_PERSON
    return Speaker(name=name, handle=handle)


def _first_text(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def surface_kind(
    info: Mapping[str, Any] | None, channel_type: str | None, channel_id: str
) -> SurfaceKind:
    """From conversations.info, else the event's channel_type, else the id's prefix."""
    if info:
        if info.get("is_im"):
            return SurfaceKind.DM
        if info.get("is_mpim"):
            return SurfaceKind.GROUP
        if info.get("is_channel") or info.get("is_group"):
            return SurfaceKind.CHANNEL
    by_type = {"im": SurfaceKind.DM, "mpim": SurfaceKind.GROUP}
    if channel_type in by_type:
        return by_type[channel_type]
    if channel_type in ("channel", "group"):
        return SurfaceKind.CHANNEL
    by_prefix = {"D": SurfaceKind.DM, "G": SurfaceKind.GROUP}
    return by_prefix.get(channel_id[:1], SurfaceKind.CHANNEL)


def build_surface(
    channel_id: str,
    kind: SurfaceKind,
    info: Mapping[str, Any] | None,
    dm_handle: str | None,
) -> Surface:
    """Name a channel by its name, a DM by the counterpart's handle; no name when unknown."""
    channel_name = _first_text(info.get("name")) if info else None
    name = dm_handle if kind is SurfaceKind.DM else channel_name
    return surface(kind, channel_id, name)


def surface(kind: SurfaceKind, surface_id: str, name: str | None) -> Surface:
    """A Slack surface: shared unless a DM; the deliverer's part size; later parts of a long
    answer go in the thread under the first."""
    return Surface(
        kind=kind,
        id=surface_id,
        name=name,
        shared=kind is not SurfaceKind.DM,
        message_budget=MESSAGE_BUDGET,
        platform="Slack",
        continues_in_thread=True,
    )


# --- text ---------------------------------------------------------------------------------------


def mentioned_users(text: str) -> set[str]:
    """The user ids of every `<@U…>` in a message, to resolve to handles."""
    found: set[str] = set()
    for match in _MARKUP.finditer(text):
        inner = match.group(1)
        if inner.startswith("@"):
            found.add(inner[1:].split("|", 1)[0])
    return found


def plain_text(text: str, handles: Mapping[str, str], strip_user: str | None = None) -> str:
    """Slack markup to the plain text a person saw: `<@U1>` → `@alice`, `<url|x>` → `x (url)`.

    `strip_user` (the bot itself) is removed entirely, as a mention is an address, not content.
    A mention nobody could resolve shows as `@someone`, never as the id.
    """

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            user = target[1:]
            if strip_user is not None and user == strip_user:
                return ""
            return "@" + (handles.get(user) or label.lstrip("@") or UNKNOWN_PERSON)
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return _special(target[1:], label)
        if label and label != target:
            return f"{label} ({target})"
        return target.removeprefix("mailto:")

    replaced = _MARKUP.sub(replace, text)
    if strip_user is not None:
        replaced = "\n".join(_SPACES.sub(" ", line).strip() for line in replaced.split("\n"))
    return unescape(replaced).strip()


def _special(command: str, label: str) -> str:
    """`<!here>`, `<!subteam^S1|@team>`, `<!date^…|fallback>`: the label Slack would show."""
    if label:
        return label
    name = command.split("^", 1)[0]
    return f"@{name}" if name in ("here", "channel", "everyone") else ""


# --- preceding messages -------------------------------------------------------------------------


def select_preceding(
    messages: Iterable[Mapping[str, Any]], trigger: SlackMessage, bot: BotIdentity
) -> list[Mapping[str, Any]]:
    """What people said before the trigger since the bot's last turn there, oldest first.

    `messages` is a page of conversations.replies or conversations.history in any order. The
    bot's last turn is its own latest message or the latest message that mentioned it (that
    message was a turn of its own, and its answer may not have been posted yet).
    """
    before = _ts_value(trigger.ts) or 0.0
    stamped = [(ts, m) for m in messages if (ts := _ts(m)) is not None and ts < before]
    earlier = [m for _, m in sorted(stamped, key=lambda pair: pair[0])]
    mention = f"<@{bot.user_id}" if bot.user_id else None
    selected: list[Mapping[str, Any]] = []
    for item in earlier:
        if _is_own(item, bot) or (mention and mention in str(item.get("text") or "")):
            selected.clear()
            continue
        if item.get("subtype") in _NEW_MESSAGE_SUBTYPES:
            selected.append(item)
    return selected[-MAX_PRECEDING:]


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
    return _ts_value(value) if isinstance(value, str) else None


def _ts_value(ts: str) -> float | None:
    try:
        return float(ts)
    except ValueError:
        return None
