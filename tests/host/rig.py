"""A `bot.host.Host` built on the doubles that ship in `bot.testing` (the in-memory store, a
scripted model, a recording outbox deliverer), for the fast tests of the host and its parts: no
database, no HTTP, no model server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from bot.config import HostSettings
from bot.host import Host
from bot.host.inputs import HostStores, Outlets, Thinking
from bot.memory.recall import RecallCache
from bot.ports.intake import Admission, Resumer
from bot.ports.outbox import InboxState
from bot.ports.records import TurnRecord
from bot.ports.tools import Tool
from bot.prompt import TokenCounter
from bot.testing.delivery import RecordingDeliverer
from bot.testing.model import ScriptedModel
from bot.testing.store import MemoryStore, open_memory_store
from bot.turns import ReplyRoute, TurnRequest
from tests.prompt.builders import make_assembler, slack_request

ROUTE = ReplyRoute("test", {"to": "C1"})
KEY = "test:C1"


@dataclass
class Rig:
    host: Host
    model: ScriptedModel
    store: MemoryStore
    deliverer: RecordingDeliverer
    records: list[TurnRecord]

    def posted(self) -> list[str]:
        """The texts the deliverer posted, in order."""
        return self.deliverer.texts

    def states(self) -> dict[int, InboxState]:
        """Each stored inbox item's state, by item id."""
        return {item_id: row.state for item_id, row in self.store.tables.items.items()}


def no_tools(request: TurnRequest, recall: RecallCache, rule: object = None) -> list[Tool]:
    return []


def request(n: int, *, key: str = KEY, text: str = "hello") -> TurnRequest:
    base = slack_request(text, key=key)
    return replace(base, turn_id=f"turn-{n}", route=ROUTE, person=f"test:person-{n}")


async def submit(host: Host, n: int, **kwargs: str) -> Admission:
    return await host.submit(request(n, **kwargs), source="test", marks=[f"event-{n}"])


def rig(
    counter: TokenCounter,
    model: ScriptedModel,
    *,
    store: MemoryStore | None = None,
    resumers: Mapping[str, Resumer] | None = None,
    sweep_seconds: float = 3600.0,
    **settings: int,
) -> Rig:
    """The host on a fresh in-memory store, or on `store` (opened on the tables an earlier process
    left, or shared: then the host is one replica of several, sweeping for orphaned work every
    `sweep_seconds`). The person's rate is unlimited unless `settings` say otherwise."""
    store = store or open_memory_store()
    deliverer = RecordingDeliverer()
    limits = {"turns_per_person_per_minute": 0, **settings}
    host = Host(
        thinking=Thinking(make_assembler(counter, memory_enabled=False), model, no_tools),
        stores=HostStores(store.history, store.inbox, store.outbox, share=store.share),
        outlets=Outlets({"test": deliverer}),
        settings=HostSettings.model_validate(limits),
        resumers=resumers,
        sweep_seconds=sweep_seconds,
    )
    records: list[TurnRecord] = []
    host.observers.append(records.append)
    return Rig(host, model, store, deliverer, records)
