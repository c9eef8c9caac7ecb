"""Telegram's long polling, our own loop: nothing is confirmed to Telegram before it is stored.

PTB's Updater confirms every update it fetched on its next call, handled or not; this loop
advances the getUpdates offset once per batch, past the updates the host has stored, and when the
host cannot (shutting down, store unwritable) it asks again from the first one not stored, or
stops (an update of another chat stored meanwhile comes again and is recognised by its mark).

A batch's chats are taken side by side, each chat's updates in order, so a batch is stored in
about one transaction (the store commits writes that arrive together as one). Someone leaving a
group changes what their DM may recall, so such an update waits for the ones before it and the
ones after it wait for it. With replicas, only the replica holding the polling duty polls (two
pollers conflict); the others stand by and take over when it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from telegram import Bot, Update
from telegram.error import TelegramError

from bot.errors import IntakeUnavailable
from bot.ports.leadership import Leadership
from channels.telegram.intake import chat_of

log = structlog.get_logger(__name__)

POLLING_DUTY = "telegram-polling"
# Only these update kinds can start a turn or feed the buffer; asking for no others saves traffic.
ALLOWED_UPDATES = [Update.MESSAGE, Update.CHANNEL_POST, Update.CALLBACK_QUERY]
POLL_BACKOFF = 0.5  # first wait after a failed getUpdates or an update not stored; doubles
POLL_BACKOFF_MAX = 30.0

Take = Callable[[dict[str, Any]], Awaitable[bool]]


class Poller:
    """The polling loop's task and its offset; `start`, then `stop` (which confirms the offset
    and gives the polling duty back)."""

    def __init__(self, bot: Bot, take: Take, *, timeout: int, leader: Leadership | None) -> None:
        """`take` stores one update (False: not stored; IntakeUnavailable: none taken now);
        `leader`: the polling duty among replicas, None when this process is the only one."""
        self._bot = bot
        self._take = take
        self._timeout = timeout
        self._leader = leader
        self._task: asyncio.Task[None] | None = None
        self._offset: int | None = None  # the next update_id to ask for; all below are stored
        self._confirmed: int | None = None  # the offset Telegram was last told

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        if self._leader is None:
            await self._bot.delete_webhook()  # getUpdates is refused while a webhook is set
        self._task = asyncio.create_task(self._poll_when_elected(), name="telegram-polling")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self._offset is not None and self._offset != self._confirmed:
                # Tell Telegram what was stored, so the next start is not handed it again (it
                # would be recognized and skipped anyway).
                with contextlib.suppress(TelegramError):
                    await self._bot.get_updates(offset=self._offset, timeout=0, limit=1)
        if self._leader is not None:
            await self._leader.release(POLLING_DUTY)

    async def _poll_when_elected(self) -> None:
        """Poll; with replicas, only while this one holds the polling duty (standing by is
        healthy). A holder whose database connection was cut stands by until it holds it again."""
        while True:
            if self._leader is not None:
                log.info("telegram_polling_standby")
                await self._leader.acquire(POLLING_DUTY)
                log.info("telegram_polling_elected")
                await self._bot.delete_webhook()
            if not await self._poll():
                return

    async def _poll(self) -> bool:
        """getUpdates in a loop; the offset moves past an update only once it is stored. Returns
        True when the polling duty was lost, False when the host stopped taking updates."""
        backoff = POLL_BACKOFF
        while True:
            if self._leader is not None and not self._leader.holds(POLLING_DUTY):
                log.warning("telegram_polling_duty_lost")
                return True
            try:
                updates = await self._bot.get_updates(
                    offset=self._offset, timeout=self._timeout, allowed_updates=ALLOWED_UPDATES
                )
            except TelegramError as exc:
                log.warning("telegram_poll_failed", error=type(exc).__name__, wait=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, POLL_BACKOFF_MAX)
                continue
            self._confirmed = self._offset
            taken = await self._take_all(updates)
            if taken is None:
                log.info("telegram_polling_stopped", reason="the host is shutting down")
                return False
            if taken:
                backoff = POLL_BACKOFF
            else:
                await asyncio.sleep(backoff)  # the store cannot write: ask again, slower
                backoff = min(backoff * 2, POLL_BACKOFF_MAX)

    async def _take_all(self, updates: tuple[Update, ...]) -> bool | None:
        """Take a batch, each chat's updates in order and the chats side by side; the offset
        moves past the stored ones up to the first that was not. True when all were taken,
        False when one could not be stored for now, None when the host no longer takes any."""
        taken: dict[int, bool | None] = {}
        chats: dict[object, list[dict[str, Any]]] = {}

        async def take_chat(payloads: list[dict[str, Any]]) -> None:
            for payload in payloads:  # a chat's later updates wait for its earlier ones
                try:
                    stored: bool | None = await self._take(payload)
                except IntakeUnavailable as exc:
                    stored = None if exc.closing else False
                taken[int(payload["update_id"])] = stored
                if not stored:
                    return

        async def take_chats() -> None:
            await asyncio.gather(*(take_chat(payloads) for payloads in chats.values()))
            chats.clear()

        for update in updates:
            payload = update.to_dict()
            if _crosses_chats(payload):  # what came before it is taken first, then it alone
                await take_chats()
                await take_chat([payload])
            else:
                chats.setdefault(chat_of(payload), []).append(payload)
        await take_chats()
        for update in updates:
            stored = taken.get(update.update_id, False)
            if not stored:
                return stored
            self._offset = update.update_id + 1
        return True


def _crosses_chats(payload: dict[str, Any]) -> bool:
    """Whether an update changes what other chats' turns may use: someone leaving a group ends
    what their DM may recall from it, so later updates (a DM among them) wait for it."""
    message = payload.get("message")
    return isinstance(message, dict) and "left_chat_member" in message
