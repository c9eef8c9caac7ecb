"""Telegram updates to decisions: start a turn, keep the message as group context, or ignore.

Pure: a Bot API `Update` as a dict in (the JSON Telegram sends), a decision out. What the model may
see (speaker name and @username, chat kind, title and id) goes into the `TurnRequest`; everything
that only directs the answer (chat id, topic id, the message to reply to) goes into the hidden
`ReplyRoute`, and the user id only into `TurnRequest.person`. A private chat's id *is* the user's
id, so a DM's surface id is a keyed pseudonym instead (`dm_surface_id`).

Rules (SPEC §7): in a private chat every text message is a turn. In a group, supergroup or channel
only a message addressed to the bot is: an @mention (or a text mention of the bot), a reply to one
of the bot's messages, or a command at the start of the text that is not addressed to another bot.
A photo's or document's caption counts as its text (mentions in it address the bot), and the file
rides the request as an attachment (its file id in the route). Other messages there are kept as
context for the next turn. Edits, service messages, and messages from bots (the host's own
included) start nothing; the one service message that matters is `left_chat_member` in a group,
which becomes `Left` (the person's memory participation there ends).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.turns import (
    ConversationKind,
    Origin,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
)
from channels.telegram.files import declared_files
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT

PLATFORM = "telegram"

_KINDS = {
    "private": SurfaceKind.DM,
    "group": SurfaceKind.GROUP,
    "supergroup": SurfaceKind.GROUP,
    "channel": SurfaceKind.CHANNEL,
}
_EDITS = ("edited_message", "edited_channel_post", "edited_business_message")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is (from getMe), to recognise mentions, commands and replies addressed to it."""

    id: int
    username: str


@dataclass(frozen=True, slots=True)
class Access:
    """Optional allowlists; an empty one allows everybody, unless `pairing` (`[access] unknown =
    "pair"`): then only the listed users and those admitted by code (the channel adds them to
    `user_ids` for the update at hand) are known, and an unknown one in private is `Unknown`."""

    chat_ids: frozenset[int] = frozenset()
    user_ids: frozenset[int] = frozenset()
    pairing: bool = False

    def knows(self, sender: object) -> bool:
        if not self.user_ids and not self.pairing:
            return True
        return isinstance(sender, Mapping) and int(sender["id"]) in self.user_ids


@dataclass(frozen=True, slots=True)
class StartTurn:
    """Run a turn. `request.preceding` is empty: the channel fills it from the chat buffer."""

    request: TurnRequest


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep the message as context for the next turn of conversation `key`."""

    key: str
    message: PrecedingMessage
    reason: str


@dataclass(frozen=True, slots=True)
class Ignore:
    reason: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """Someone on no allowlist wrote in private while pairing is on: they may get a code.
    `label` is the name they write under (untrusted: for the operator's listing)."""

    person: str
    chat_id: int
    label: str


@dataclass(frozen=True, slots=True)
class Left:
    """A member left (or was removed from) a group: `person` no longer takes part in it."""

    person: str
    surface_id: str
    at: datetime


Decision = StartTurn | Keep | Ignore | Left | Unknown


def conversation_key(chat_id: int, topic_id: int | None = None) -> str:
    """`telegram:<chat id>`, plus `:<topic id>` for a forum topic (its own conversation)."""
    return f"{PLATFORM}:{chat_id}" if topic_id is None else f"{PLATFORM}:{chat_id}:{topic_id}"


def dm_surface_id(chat_id: int, key: bytes) -> str:
    """The surface id of a private chat: a keyed pseudonym, because its chat id is the user id.

    A DM still needs an id of its own (memory is scoped by surface), but the user id must never
    reach the model; a keyed hash (the key is secret) keeps it unique, stable and not reversible.
    """
    digest = hmac.new(key, str(chat_id).encode(), hashlib.sha256).hexdigest()
    return f"dm_{digest[:16]}"


def decide(
    update: Mapping[str, Any],
    me: BotIdentity,
    access: Access,
    *,
    turn_id: str,
    received_at: datetime,
    dm_key: bytes,
) -> Decision:
    """What to do with one update. `dm_key` keys the pseudonymous surface id of private chats."""
    if any(key in update for key in _EDITS):
        return Ignore("edited message")
    message = update.get("message") or update.get("channel_post")
    if not isinstance(message, Mapping):
        return Ignore("not a new message")
    chat = message.get("chat") or {}
    kind = _KINDS.get(str(chat.get("type")))
    if kind is None:
        return Ignore(f"unsupported chat type {chat.get('type')!r}")
    chat_id = int(chat["id"])
    if access.chat_ids and chat_id not in access.chat_ids:
        return Ignore("chat not in telegram.allowed_chat_ids")
    gone = message.get("left_chat_member")
    if isinstance(gone, Mapping) and kind is not SurfaceKind.DM:
        return _left(gone, chat_id, received_at)
    sender = message.get("from")
    if isinstance(sender, Mapping) and sender.get("is_bot"):
        return Ignore("sent by a bot")
    text = _text_of(message)
    if not text.strip() and not declared_files(message):
        return Ignore("no text or file (a service message)")
    topic = _topic(message)
    key = conversation_key(chat_id, topic)
    allowed = access.knows(sender)
    if kind is SurfaceKind.DM:
        if not allowed and access.pairing and isinstance(sender, Mapping):
            return Unknown(person_id(sender["id"]), chat_id, _sender_label(sender))
        if not allowed:
            return Ignore("user not in telegram.allowed_user_ids")
        surface_id = dm_surface_id(chat_id, dm_key)
        text = _strip_address(message, me)  # `/summarize@bot ...` reads as `/summarize ...`
        started = _request(message, kind, key, surface_id, text, turn_id, received_at)
        return StartTurn(replace(started, origin=_origin(access)))
    addressed = _addressed(message, me, topic)
    if addressed and allowed:
        text = _strip_address(message, me)
        started = _request(message, kind, key, str(chat_id), text, turn_id, received_at)
        return StartTurn(replace(started, origin=_origin(access)))
    reason = "user not in telegram.allowed_user_ids" if addressed else "not addressed to the bot"
    return Keep(key, _preceding(message, _context_text(message, text)), reason)


def _origin(access: Access) -> Origin:
    """A person the allowlist names (only they start turns when there is one), else one no
    allowlist names; other bots never start a turn here."""
    return Origin.PERSON if access.user_ids else Origin.UNLISTED


def _left(gone: Mapping[str, Any], chat_id: int, received_at: datetime) -> Decision:
    """As of `received_at`: the host's clock, which memory's times follow too."""
    if gone.get("is_bot") or "id" not in gone:
        return Ignore("a bot left the chat")
    return Left(f"{PLATFORM}:{gone['id']}", str(chat_id), received_at)


# --- addressing ---------------------------------------------------------------------------------


def _topic(message: Mapping[str, Any]) -> int | None:
    thread = message.get("message_thread_id")
    return int(thread) if message.get("is_topic_message") and thread is not None else None


def _addressed(message: Mapping[str, Any], me: BotIdentity, topic: int | None) -> bool:
    return (
        _mentions_me(message, me) or _commands_me(message, me) or _replies_to_me(message, me, topic)
    )


def _text_of(message: Mapping[str, Any]) -> str:
    """The message text, or a media message's caption (which counts as its text)."""
    text = message.get("text")
    if not isinstance(text, str):
        text = message.get("caption")
    return text if isinstance(text, str) else ""


def _context_text(message: Mapping[str, Any], text: str) -> str:
    """What a kept group message says: its text, and the names of the files it shared."""
    names = [attachment.name for _, attachment in declared_files(message)]
    shared = f"[shared {', '.join(names)}]" if names else ""
    return f"{text}\n{shared}".strip() if shared else text


def _entities(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    key = "entities" if isinstance(message.get("text"), str) else "caption_entities"
    entities = message.get(key) or ()
    return [e for e in entities if isinstance(e, Mapping)]


def _entity_text(text: str, entity: Mapping[str, Any]) -> str:
    """The entity's text; Telegram's offsets and lengths count UTF-16 code units."""
    data = text.encode("utf-16-le")
    start = int(entity.get("offset", 0)) * 2
    end = start + int(entity.get("length", 0)) * 2
    return data[start:end].decode("utf-16-le", errors="replace")


def _mentions_me(message: Mapping[str, Any], me: BotIdentity) -> bool:
    text = _text_of(message)
    for entity in _entities(message):
        if entity.get("type") == "mention":
            if _entity_text(text, entity).lower() == f"@{me.username}".lower():
                return True
        elif entity.get("type") == "text_mention":
            user = entity.get("user")
            if isinstance(user, Mapping) and user.get("id") == me.id:
                return True
    return False


def _leading_command(message: Mapping[str, Any]) -> str | None:
    for entity in _entities(message):
        if entity.get("type") == "bot_command" and int(entity.get("offset", -1)) == 0:
            return _entity_text(_text_of(message), entity)
    return None


def _commands_me(message: Mapping[str, Any], me: BotIdentity) -> bool:
    command = _leading_command(message)
    if command is None:
        return False
    _, _, target = command.partition("@")
    return not target or target.lower() == me.username.lower()


def _replies_to_me(message: Mapping[str, Any], me: BotIdentity, topic: int | None) -> bool:
    replied = message.get("reply_to_message")
    if not isinstance(replied, Mapping):
        return False
    if topic is not None and replied.get("message_id") == topic:
        return False  # every topic message "replies" to the topic's first message
    author = replied.get("from")
    return isinstance(author, Mapping) and author.get("id") == me.id


def _strip_address(message: Mapping[str, Any], me: BotIdentity) -> str:
    """Drop a leading @mention of the bot and the `@bot` suffix of a leading command."""
    text = _text_of(message)
    mention = f"@{me.username}".lower()
    stripped = text
    for entity in _entities(message):
        if int(entity.get("offset", -1)) != 0:
            continue
        span = _entity_text(text, entity)
        if entity.get("type") == "mention" and span.lower() == mention:
            stripped = text[len(span) :].lstrip()
        elif entity.get("type") == "bot_command" and span.lower().endswith(mention):
            stripped = span[: -len(mention)] + text[len(span) :]
    return stripped if stripped.strip() or declared_files(message) else text


# --- building the request -----------------------------------------------------------------------


def _request(
    message: Mapping[str, Any],
    kind: SurfaceKind,
    key: str,
    surface_id: str,
    text: str,
    turn_id: str,
    received_at: datetime,
) -> TurnRequest:
    chat = message["chat"]
    topic = _topic(message)
    files = declared_files(message)
    values: dict[str, Any] = {
        "chat_id": int(chat["id"]),
        "thread_id": topic,
        "reply_to": None if kind is SurfaceKind.DM else int(message["message_id"]),
    }
    sender = message.get("from")
    if kind is not SurfaceKind.DM and isinstance(sender, Mapping) and "id" in sender:
        values["user_id"] = int(sender["id"])  # whom a reply meant for them alone goes to
    if files:  # file ids are route-side: the host fetches "attachment N" through the channel
        values["files"] = [file_id for file_id, _ in files]
    return TurnRequest(
        conversation_key=key,
        kind=ConversationKind.PUSH,
        channel=PLATFORM,
        text=text,
        received_at=received_at,
        turn_id=turn_id,
        speaker=_speaker(message),
        surface=surface(kind, surface_id, _surface_name(chat)),
        attachments=tuple(attachment for _, attachment in files),
        route=ReplyRoute(platform=PLATFORM, values=values),
        person=_person(message),
    )


def _person(message: Mapping[str, Any]) -> str:
    """Who answers for the message, for per-person limits and memory: its user; a channel post
    (or an anonymous admin) has none and speaks for a chat, which then counts as the person, so
    six posts cannot dodge a per-person budget or turn rate."""
    sender = message.get("from")
    if isinstance(sender, Mapping):
        return person_id(sender["id"])
    chat = message.get("sender_chat") or message.get("chat") or {}
    return person_id(f"chat:{chat.get('id')}")


def _speaker(message: Mapping[str, Any]) -> Speaker:
    sender = message.get("from")
    if isinstance(sender, Mapping):
        name = " ".join(str(sender.get(k) or "") for k in ("first_name", "last_name")).strip()
        handle = sender.get("username")
        return Speaker(
            name=name or str(handle or "someone"), handle=str(handle) if handle else None
        )
    # A channel post has no user: it speaks for the channel, signed or not.
    chat = message.get("chat") or {}
    return Speaker(name=str(message.get("author_signature") or chat.get("title") or "channel"))


def _surface_name(chat: Mapping[str, Any]) -> str | None:
    if chat.get("type") != "private":
        return str(chat["title"]) if chat.get("title") else None
    if chat.get("username"):
        return f"@{chat['username']}"
    name = " ".join(str(chat.get(k) or "") for k in ("first_name", "last_name")).strip()
    return name or None


def _preceding(message: Mapping[str, Any], text: str) -> PrecedingMessage:
    speaker = _speaker(message)
    return PrecedingMessage(
        at=datetime.fromtimestamp(int(message.get("date", 0)), UTC),
        name=speaker.name,
        text=text,
        handle=speaker.handle,
    )


def surface(kind: SurfaceKind, surface_id: str, name: str | None) -> Surface:
    """A Telegram surface: shared unless a DM; parts measured as the deliverer splits them."""
    return Surface(
        kind=kind,
        id=surface_id,
        name=name,
        shared=kind is not SurfaceKind.DM,
        message_budget=TELEGRAM_MESSAGE_LIMIT,
        platform="Telegram",
    )


def person_id(user_id: object) -> str:
    """Who a person is across conversations (memory attribution, rates): the Telegram user id.
    `bot preview` builds it with this function too."""
    return f"{PLATFORM}:{user_id}"


def _sender_label(sender: Mapping[str, Any]) -> str:
    name = " ".join(str(sender.get(k) or "") for k in ("first_name", "last_name")).strip()
    handle = sender.get("username")
    return f"{name} (@{handle})" if handle else name or "someone"
