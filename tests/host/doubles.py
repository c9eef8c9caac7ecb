"""In-memory doubles of the ports `bot.host.Host` takes, for fast unit tests of the host alone.

Each is a real class implementing its Protocol (no mocks): the inbox and outbox keep what they
are given in lists, the deliverer records the parts it was asked to post, and the model runtime
returns a canned `TurnOutcome` (or raises a canned error), optionally holding each turn at a
gate until the test opens it, so tests wait on events, never on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from bot.ports.delivery import Deliverer
from bot.ports.history import Chatter
from bot.ports.intake import Adopted, InboxItem
from bot.ports.model import TurnOutcome, TurnPlan
from bot.ports.outbox import InboxState, OutboxPart, Publication
from bot.turns import Continuation, HistoryEntry, ReplyRoute, TextBlock, TurnRequest


class MemoryInbox:
    """`bot.ports.intake.Inbox` in a list: marks dedupe; an item is pending until the outbox
    closes it."""

    def __init__(self) -> None:
        self.items: list[InboxItem] = []
        self.states: dict[int, InboxState] = {}
        self._marks: set[tuple[str, str]] = set()
        self.chatter: list[Chatter] = []  # kept messages noted with new marks

    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        keyed = {(source, mark) for mark in marks}
        if keyed & self._marks:
            return None
        self._marks |= keyed
        item = InboxItem(len(self.items) + 1, request)
        self.items.append(item)
        self.states[item.item_id] = InboxState.PENDING
        return item

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        keyed = {(source, mark) for mark in marks}
        fresh = not keyed & self._marks
        self._marks |= keyed
        if fresh and chatter is not None:
            self.chatter.append(chatter)
        return fresh

    async def claim(self, item_id: int) -> int:
        return 1

    async def pending(self) -> list[InboxItem]:
        return [i for i in self.items if self.states[i.item_id] is InboxState.PENDING]


class MemoryHistory:
    """`bot.ports.history.HistoryStore` in a dict."""

    def __init__(self) -> None:
        self.entries: dict[str, list[HistoryEntry]] = {}

    async def load(self, key: str) -> list[HistoryEntry]:
        return list(self.entries.get(key, []))

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        kept = [] if replace else self.entries.get(key, [])
        self.entries[key] = [*kept, *entries]

    async def reset(self, key: str) -> bool:
        return self.entries.pop(key, None) is not None

    async def conversations(self) -> list[str]:
        return list(self.entries)


class MemoryOutbox:
    """`bot.ports.outbox.Outbox` in a list; publishing writes the history and closes the inbox
    item, as the store's one transaction does."""

    def __init__(self, inbox: MemoryInbox, history: MemoryHistory) -> None:
        self.publications: list[Publication] = []
        self.marked: dict[str, str | None] = {}  # part id -> platform id (None: abandoned)
        self.streams: dict[str, dict[int, str]] = {}  # turn id -> messages its streams opened
        self._inbox = inbox
        self._history = history

    async def publish(self, publication: Publication) -> None:
        self.publications.append(publication)
        key, entries = publication.conversation_key, publication.entries
        await self._history.publish(key, entries, replace=publication.replace)
        if publication.item_id is not None and publication.state is not None:
            self._inbox.states[publication.item_id] = publication.state

    async def delivered(self, part_id: str, platform_id: str) -> None:
        self.marked[part_id] = platform_id

    async def abandon(self, part_id: str, error: str) -> None:
        self.marked[part_id] = None

    async def undelivered(self) -> list[OutboxPart]:
        return [part for part in self._parts() if part.part_id not in self.marked]

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        return [
            replace(part, platform_id=self.marked.get(part.part_id) or part.platform_id)
            for part in self._parts()
            if part.turn_id == turn_id
        ]

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        self.streams.setdefault(turn_id, {})[index] = platform_id

    async def streamed(self, turn_id: str) -> dict[int, str]:
        return dict(self.streams.get(turn_id, {}))

    def _parts(self) -> list[OutboxPart]:
        return [part for publication in self.publications for part in publication.parts]


@dataclass
class RecordingDeliverer(Deliverer):
    """`bot.ports.delivery.Deliverer` that posts into a list (an answer is one part) and says
    when it did."""

    posted: list[tuple[ReplyRoute, str]] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return [text]

    async def post(self, part: OutboxPart, first: str | None) -> str:
        async with self.changed:
            self.posted.append((part.route, part.text))
            self.changed.notify_all()
        return part.part_id

    def route_to(self, destination: str) -> ReplyRoute:
        return ReplyRoute("test", {"to": destination})

    async def wait_for(self, count: int) -> list[str]:
        """The texts posted, once at least `count` have been."""
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.posted) >= count)
        return [text for _, text in self.posted]


class CannedModel:
    """`bot.ports.model.ModelRuntime` answering every plan with `outcome`, or raising `error`.

    With `gated`, each run announces itself on `started` and waits for `release` first, so a
    test can hold a turn mid-model-call while it looks at the host."""

    def __init__(
        self,
        outcome: TurnOutcome | None = None,
        *,
        error: Exception | None = None,
        gated: bool = False,
    ) -> None:
        answer = HistoryEntry("assistant", (TextBlock("canned answer"),), at=datetime.now(UTC))
        self.outcome = outcome or TurnOutcome(text="canned answer", entries=(answer,))
        self.error = error
        self.gated = gated
        self.plans: list[TurnPlan] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.closed = False

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        self.plans.append(plan)
        if self.gated:
            self.started.set()
            await self.release.wait()
        if self.error is not None:
            raise self.error
        return self.outcome

    async def aclose(self) -> None:
        self.closed = True


class RecordingResumer:
    """`bot.ports.intake.Resumer` that notes what it resumed and returns `note` for each."""

    def __init__(self, note: str = "[The host: the approved call ran. It returned: 42.]") -> None:
        self.note = note
        self.resumed: list[tuple[TurnRequest, Continuation]] = []

    async def resume(self, request: TurnRequest, continuation: Continuation) -> str:
        self.resumed.append((request, continuation))
        return self.note


class MemoryShare:
    """`bot.ports.intake.WorkShare` over a `MemoryInbox`, seen by one replica: it adopts pending
    items nobody adopted yet, except in the conversations another live replica owns
    (`elsewhere`)."""

    def __init__(self, inbox: MemoryInbox) -> None:
        self._inbox = inbox
        self.adopted: set[int] = set()
        self.elsewhere: set[str] = set()

    def _unowned(self) -> list[InboxItem]:
        return [
            item
            for item in self._inbox.items
            if self._inbox.states[item.item_id] is InboxState.PENDING
            and item.item_id not in self.adopted
            and item.request.conversation_key not in self.elsewhere
        ]

    async def adopt(self, conversation_key: str) -> Adopted:
        items = tuple(i for i in self._unowned() if i.request.conversation_key == conversation_key)
        self.adopted |= {item.item_id for item in items}
        return Adopted(items=items)

    async def orphaned(self, limit: int) -> list[str]:
        keys = dict.fromkeys(item.request.conversation_key for item in self._unowned())
        return list(keys)[:limit]
