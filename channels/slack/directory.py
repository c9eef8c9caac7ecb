"""The Slack lookups behind a turn: a stored request's `Lookups` named when its turn starts
(`names`): who spoke (users.info), where (conversations.info) and what others said before
(conversations.replies / conversations.history).

Users and conversations are cached for `slack.user_cache_seconds` in bounded caches, failed
lookups too (an unknown user id is not asked about again on every message that names it). Every
lookup degrades instead of failing the turn: an unknown person is "someone", a channel the app
may not read (missing_scope) is named by kind and id, unreadable history means no preceding
messages. One message triggers at most `MAX_LOOKUPS_PER_MESSAGE` users.info / conversations.info
calls (inside `one_message()`): a message naming fifty people, or a channel where fifty people
spoke, must not cost fifty calls before its turn; past the budget, names degrade the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.turns import Lookups, Names, PrecedingMessage, Speaker
from channels.slack import events
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.events import BotIdentity
from channels.slack.names import (
    build_surface,
    mentioned_users,
    plain_text,
    speaker_from_user,
    surface_kind,
    viewing,
)

log = structlog.get_logger(__name__)

CACHE_ENTRIES = 5000
HISTORY_PAGE = 200  # messages per conversations.* page
# Slack pages a thread from its start only; past this many pages its newest messages are out of
# reach, and the oldest ones would be the wrong context, so such a thread gives none.
THREAD_PAGES = 5

MAX_LOOKUPS_PER_MESSAGE = 8
TURN_SECONDS = 24 * 3600.0  # how long a thread's last turn is remembered (a read's start)

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """A bounded mapping whose entries expire `ttl` seconds after they were stored."""

    def __init__(
        self, ttl: float, maxsize: int = CACHE_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._maxsize = maxsize
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[bool, V | None]:
        """(True, value) for a live entry, (False, None) for a miss."""
        item = self._items.get(key)
        if item is None:
            return False, None
        stored_at, value = item
        if self._clock() - stored_at >= self._ttl:
            del self._items[key]
            return False, None
        self._items.move_to_end(key)
        return True, value

    def put(self, key: K, value: V) -> None:
        if self._ttl <= 0:
            return
        self._items[key] = (self._clock(), value)
        self._items.move_to_end(key)
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class _Budget:
    def __init__(self, calls: int) -> None:
        self.left = calls
        self.reported = False

    def spend(self) -> bool:
        if self.left > 0:
            self.left -= 1
            return True
        if not self.reported:
            self.reported = True
            log.info("slack_lookups_capped", limit=MAX_LOOKUPS_PER_MESSAGE)
        return False


# The budget of the message being read; tasks that asyncio.gather starts share it (a copied
# context holds the same object).
_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("budget", default=None)


class SlackDirectory:
    """Names and context for a turn, read through the Web API."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        cache_seconds: float,
        resolve_channel_names: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._resolve_channel_names = resolve_channel_names
        self._users: TtlCache[str, Mapping[str, Any] | None] = TtlCache(cache_seconds, clock=clock)
        self._channels: TtlCache[str, Mapping[str, Any] | None] = TtlCache(
            cache_seconds, clock=clock
        )
        self._pending_users: dict[str, asyncio.Future[Mapping[str, Any] | None]] = {}
        # (channel, thread root) -> the ts of the bot's last turn found there
        self._turns: TtlCache[tuple[str, str], str] = TtlCache(TURN_SECONDS, clock=clock)

    @contextlib.contextmanager
    def one_message(self) -> Iterator[None]:
        """Lookups inside share one message's budget of `MAX_LOOKUPS_PER_MESSAGE` calls."""
        token = _budget.set(_Budget(MAX_LOOKUPS_PER_MESSAGE))
        try:
            yield
        finally:
            _budget.reset(token)

    async def user(self, user_id: str) -> Mapping[str, Any] | None:
        hit, cached = self._users.get(user_id)
        if hit:
            return cached
        pending = self._pending_users.get(user_id)
        if pending is None:
            if not _spend():
                return None
            pending = asyncio.ensure_future(self._fetch_user(user_id))
            self._pending_users[user_id] = pending
            pending.add_done_callback(lambda _: self._pending_users.pop(user_id, None))
        return await asyncio.shield(pending)

    async def _fetch_user(self, user_id: str) -> Mapping[str, Any] | None:
        try:
            response = await self._client.users_info(user=user_id)
        except CALL_ERRORS as exc:
            _log_failure("users.info", exc)
            found = None  # remembered like an answer: no call again on the next message
        else:
            user = response.get("user")
            found = user if isinstance(user, Mapping) else None
        self._users.put(user_id, found)
        return found

    async def speaker(self, user_id: str) -> Speaker:
        return speaker_from_user(await self.user(user_id))

    async def plain(self, text: str, strip_user: str | None = None) -> str:
        """The message as a person reads it, with every mentioned user resolved to a handle."""
        handles = await self._handles(mentioned_users(text) - {strip_user})
        return plain_text(text, handles, strip_user)

    async def _handles(self, user_ids: Iterable[str]) -> dict[str, str]:
        ids = sorted(user_ids)
        speakers = await asyncio.gather(*(self.speaker(user_id) for user_id in ids))
        return {
            user_id: speaker.handle
            for user_id, speaker in zip(ids, speakers, strict=True)
            if speaker.handle
        }

    async def conversation(self, channel_id: str) -> Mapping[str, Any] | None:
        """conversations.info's channel, or None when it cannot be read (scope, access)."""
        if not self._resolve_channel_names:
            return None
        hit, cached = self._channels.get(channel_id)
        if hit:
            return cached
        if not _spend():
            return None
        try:
            response = await self._client.conversations_info(channel=channel_id)
        except SlackApiError as exc:
            # missing_scope and friends are configuration, not transient: remember the answer.
            _log_failure("conversations.info", exc)
            self._channels.put(channel_id, None)
            return None
        except CALL_ERRORS as exc:
            _log_failure("conversations.info", exc)
            return None
        channel = response.get("channel")
        found = channel if isinstance(channel, Mapping) else None
        self._channels.put(channel_id, found)
        return found

    async def names(self, lookups: Lookups) -> Names:
        """The names behind a stored request's lookups, looked up now (at most
        `MAX_LOOKUPS_PER_MESSAGE` calls; each degrades rather than fails)."""
        bot = BotIdentity(lookups.bot_user, lookups.bot_author)
        viewed = lookups.viewing
        with self.one_message():
            speaker, text, info, preceding, viewed_info = await asyncio.gather(
                self._speaker(lookups),
                self.plain(lookups.text, strip_user=bot.user_id),
                self.conversation(lookups.surface),
                self.preceding(lookups, bot),
                self.conversation(viewed) if viewed else _nothing(),
            )
        kind = surface_kind(info, lookups.surface_type, lookups.surface)
        return Names(
            text=text,
            speaker=speaker,
            surface=build_surface(lookups.surface, kind, info, speaker.handle),
            preceding=preceding,
            viewing=viewing(viewed, viewed_info) if viewed else None,
        )

    async def _speaker(self, lookups: Lookups) -> Speaker:
        if lookups.speaker_name is not None:
            return Speaker(name=lookups.speaker_name)
        return await self.speaker(lookups.speaker)

    async def preceding(self, lookups: Lookups, bot: BotIdentity) -> tuple[PrecedingMessage, ...]:
        """What others said since the bot's last turn there (nothing in a DM: every message
        there is a turn of its own)."""
        if events.is_dm(lookups.surface_type, lookups.surface):
            return ()
        threaded = events.in_thread(lookups.message, lookups.thread)
        try:
            page = await self._read_around(lookups, threaded, bot)
        except CALL_ERRORS as exc:
            _log_failure("conversations.replies" if threaded else "history", exc)
            return ()
        selected = events.select_preceding(page, lookups.message, bot)
        return tuple(await asyncio.gather(*(self._preceding_one(item) for item in selected)))

    async def _read_around(
        self, lookups: Lookups, threaded: bool, bot: BotIdentity
    ) -> list[Mapping[str, Any]]:
        if threaded:
            return await self._thread_since(lookups.surface, str(lookups.thread), lookups, bot)
        response = await self._client.conversations_history(
            channel=lookups.surface, latest=lookups.message, inclusive=False, limit=HISTORY_PAGE
        )
        return _messages(response.get("messages"))

    async def _thread_since(
        self, channel: str, root: str, lookups: Lookups, bot: BotIdentity
    ) -> list[Mapping[str, Any]]:
        """The thread before the trigger, read from the bot's last turn there when an earlier
        read found it (nothing before it can be preceding again), else from the thread's start.
        A long thread is then one short page a turn, not every message since its root."""
        trigger = lookups.message
        hit, since = self._turns.get((channel, root))
        if hit and since is not None and (events.ts_value(since) or 0.0) >= _ts_of(trigger):
            since = None  # a turn older than the one remembered (run again): read it all
        page = await self._thread(channel, root, trigger, since)
        if since is not None:  # Slack gives the thread's root with every page: drop what is old
            page = [item for item in page if _ts_of(item.get("ts")) > _ts_of(since)]
        if (last := events.last_turn(page, trigger, bot)) is not None:
            self._turns.put((channel, root), last)
        return page

    async def _thread(
        self, channel: str, root: str, latest: str, oldest: str | None
    ) -> list[Mapping[str, Any]]:
        found: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(THREAD_PAGES):
            response = await self._client.conversations_replies(
                channel=channel,
                ts=root,
                latest=latest,
                limit=HISTORY_PAGE,
                cursor=cursor,
                oldest=oldest,
            )
            found.extend(_messages(response.get("messages")))
            metadata = response.get("response_metadata") or {}
            cursor = metadata.get("next_cursor") if isinstance(metadata, Mapping) else None
            if not cursor:
                return found
        log.info("slack_thread_too_long", pages=THREAD_PAGES)
        return []

    async def _preceding_one(self, item: Mapping[str, Any]) -> PrecedingMessage:
        author = events.author_of(item)
        speaker = await self.speaker(author) if author else events.bot_speaker(item)
        text = await self.plain(str(item.get("text") or ""), strip_user=None)
        return events.preceding_message(item, speaker, text)


async def _nothing() -> None:
    return None


def _ts_of(value: object) -> float:
    return (events.ts_value(value) or 0.0) if isinstance(value, str) else 0.0


def _messages(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value or () if isinstance(item, Mapping)]


def _spend() -> bool:
    budget = _budget.get()
    return budget is None or budget.spend()


def _log_failure(method: str, exc: BaseException) -> None:
    log.warning("slack_lookup_failed", method=method, error=error_code(exc))
