"""Telegram updates taken in, polled or posted: `mapping.decide` says whether an update starts a
turn, is kept in the chat buffer as context, or is ignored, and the host records it durably under
its update_id (a turn's request, or a kept message's place in the buffer, goes in in the same
transaction), so a redelivered update starts nothing and is buffered once.

Updates of one chat are taken one at a time, in order (so a group message is buffered before a
later mention in that chat takes the buffer); different chats' updates may be taken side by side.
A press on an approval card's button is noted once and answered always.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog
from telegram import Bot
from telegram.error import TelegramError

from bot import replies
from bot.errors import IntakeUnavailable
from bot.ports.access import Pairing
from bot.ports.approvals import PressDesk
from bot.ports.history import ChatBuffer, Chatter
from bot.ports.intake import Admission, TurnSink
from bot.ports.memory import Departure, Departures
from channels.telegram import approvals
from channels.telegram.mapping import (
    PLATFORM,
    Access,
    BotIdentity,
    Ignore,
    Keep,
    Left,
    StartTurn,
    Unknown,
    decide,
    person_id,
)

log = structlog.get_logger(__name__)


class UpdateIntake:
    """Takes one update at a time per chat; `ready` once the bot knows who it is."""

    def __init__(
        self,
        bot: Bot,
        buffer: ChatBuffer,
        access: Access,
        *,
        dm_key: bytes,
        group_buffer: int,
        departures: Departures | None,
        pairing: Pairing | None = None,
    ) -> None:
        """`dm_key` keys the pseudonymous surface ids of private chats; `group_buffer` is how
        many kept messages a chat's buffer holds; `pairing`: the admitted people and their codes
        when `[access] unknown = "pair"` (None: the allowlists alone)."""
        self._bot = bot
        self._buffer = buffer
        self._access = access
        self._dm_key = dm_key
        self._group_buffer = group_buffer
        self._departures = departures
        self._pairing = pairing
        self._sink: TurnSink | None = None
        self._me: BotIdentity | None = None
        self._desk: PressDesk | None = None  # where presses on approval cards go
        self._taking = KeyedLocks()  # one update of a chat at a time, polled or posted

    def ready(self, sink: TurnSink, me: BotIdentity) -> None:
        self._sink, self._me = sink, me

    def use(self, desk: PressDesk) -> None:
        self._desk = desk

    async def take(self, payload: dict[str, Any]) -> bool:
        """Take one update (Bot API JSON); False when it could not be stored. Raises
        IntakeUnavailable when the host takes nothing now."""
        async with self._taking.hold(chat_of(payload)):
            try:
                return await self._handle(payload)
            except IntakeUnavailable:
                raise
            except Exception:  # one bad update must not stop the ones behind it
                log.exception("telegram_update_failed", update_id=payload.get("update_id"))
                return True

    async def _handle(self, payload: dict[str, Any]) -> bool:
        """Decide what one update means and act on it; False when it could not be stored."""
        assert self._sink is not None, "start() the channel first"
        assert self._me is not None
        update_id = str(payload.get("update_id"))
        query = payload.get("callback_query")
        if isinstance(query, dict):  # a press on a card's button: taken once, answered always
            if await self._sink.note(source=PLATFORM, marks=[update_id]):
                await approvals.press(self._bot, self._desk, query)
            return True
        decision = decide(
            payload,
            self._me,
            await self._access_for(payload),
            turn_id=uuid.uuid4().hex,
            received_at=datetime.now(UTC),
            dm_key=self._dm_key,
        )
        if isinstance(decision, StartTurn):
            return await self._start_turn(decision, update_id)
        if isinstance(decision, Unknown):
            if await self._sink.note(source=PLATFORM, marks=[update_id]):
                await self._offer_code(decision)
            return True
        # A kept message is buffered in the transaction that records its update as seen: a
        # crash cannot lose it nor, after the redelivery, buffer it twice.
        chatter = None
        if isinstance(decision, Keep):
            chatter = Chatter(decision.key, decision.message, self._group_buffer)
        if not await self._sink.note(source=PLATFORM, marks=[update_id], chatter=chatter):
            log.info("telegram_update_duplicate", update_id=update_id)
        elif isinstance(decision, Ignore):
            log.debug("telegram_update_ignored", update_id=update_id, reason=decision.reason)
        elif isinstance(decision, Left):
            if self._departures is not None:
                left = Departure(PLATFORM, decision.surface_id, decision.person, decision.at)
                await self._departures.left(left)
        else:
            log.debug(
                "telegram_message_kept", conversation_key=decision.key, reason=decision.reason
            )
        return True

    async def _access_for(self, payload: dict[str, Any]) -> Access:
        """The allowlists for this update: with pairing, its sender is known too when an
        operator admitted them (read each time: an approval elsewhere counts at once)."""
        sender = (payload.get("message") or {}).get("from")
        access = self._access
        if self._pairing is None or not isinstance(sender, dict) or "id" not in sender:
            return access
        if access.knows(sender) or not await self._pairing.admitted(person_id(sender["id"])):
            return access
        return replace(access, user_ids=access.user_ids | {int(sender["id"])})

    async def _offer_code(self, unknown: Unknown) -> None:
        """Send an unknown person a one-time code in private (at most a few an hour: beyond,
        nothing). The code is in that message only: never logged."""
        assert self._pairing is not None
        code = await self._pairing.ask(unknown.person, unknown.label)
        log.info("telegram_pairing_offered", offered=code is not None)
        if code is None:
            return
        try:
            await self._bot.send_message(unknown.chat_id, replies.pairing_code(code))
        except TelegramError as exc:
            log.warning("telegram_pairing_not_sent", error=type(exc).__name__)

    async def _start_turn(self, decision: StartTurn, update_id: str) -> bool:
        assert self._sink is not None
        key = decision.request.conversation_key
        # Read, not taken: the inbox empties the buffer in the transaction that stores the turn,
        # so a turn that cannot be stored (full disk, shutting down) leaves it whole.
        try:
            buffered = await self._buffer.peek(key)
        except Exception as exc:  # the store cannot be read: not stored, so not confirmed
            log.warning("telegram_buffer_unreadable", error=type(exc).__name__)
            raise IntakeUnavailable(type(exc).__name__) from None
        request = replace(decision.request, preceding=buffered.messages)
        admission = await self._sink.submit(
            request, source=PLATFORM, marks=[update_id], consumes=buffered.upto
        )
        log.info(
            "telegram_turn_submitted",
            turn_id=request.turn_id,
            conversation_key=key,
            preceding=len(buffered.messages),
            admission=admission.value,
        )
        if admission in (Admission.BUSY, Admission.RATE_LIMITED):
            # Stored, then refused: the turn that would have read them does not run, so they
            # go back for the next one.
            for message in buffered.messages:
                await self._buffer.append(key, message, keep=self._group_buffer)
        if admission is Admission.CLOSED:
            raise IntakeUnavailable("the host is shutting down", closing=True)
        return admission.acknowledge


def chat_of(payload: dict[str, Any]) -> object:
    """The chat an update belongs to (None for one that names none: those go one at a time)."""
    for kind in ("message", "channel_post", "edited_message", "edited_channel_post"):
        message = payload.get(kind)
        if isinstance(message, dict) and isinstance(message.get("chat"), dict):
            return message["chat"].get("id")
    query = payload.get("callback_query")
    if isinstance(query, dict) and isinstance(query.get("message"), dict):
        return chat_of({"message": query["message"]})
    return None


class KeyedLocks:
    """One lock per key, each kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[object, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: object) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
