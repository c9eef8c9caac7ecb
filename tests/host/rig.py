"""A `bot.host.Host` built on the in-memory doubles of `tests/host/doubles.py`, for the fast
tests of the host's parts: no store, no HTTP, no model server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from bot.config import HostSettings
from bot.host import Host
from bot.host.parts import HostStores, Outlets, Thinking
from bot.memory.recall import RecallCache
from bot.ports.intake import Admission, Resumer
from bot.ports.records import TurnRecord
from bot.ports.tools import Tool
from bot.prompt import TokenCounter
from bot.turns import ReplyRoute, TurnRequest
from tests.host.doubles import (
    CannedModel,
    MemoryHistory,
    MemoryInbox,
    MemoryOutbox,
    MemoryShare,
    RecordingDeliverer,
)
from tests.prompt.builders import make_assembler, slack_request

ROUTE = ReplyRoute("test", {"to": "C1"})
KEY = "test:C1"


@dataclass
class Rig:
    host: Host
    model: CannedModel
    inbox: MemoryInbox
    outbox: MemoryOutbox
    history: MemoryHistory
    deliverer: RecordingDeliverer
    records: list[TurnRecord]


def no_tools(request: TurnRequest, recall: RecallCache, rule: object = None) -> list[Tool]:
    return []


def request(n: int, *, key: str = KEY, text: str = "hello") -> TurnRequest:
    base = slack_request(text, key=key)
    return replace(base, turn_id=f"turn-{n}", route=ROUTE, person=f"test:person-{n}")


async def submit(host: Host, n: int, **kwargs: str) -> Admission:
    return await host.submit(request(n, **kwargs), source="test", marks=[f"event-{n}"])


def rig(
    counter: TokenCounter,
    model: CannedModel,
    *,
    resumers: Mapping[str, Resumer] | None = None,
    inbox: MemoryInbox | None = None,
    share: MemoryShare | None = None,
    sweep_seconds: float = 3600.0,
    **settings: int,
) -> Rig:
    """The host on fresh doubles (or on `inbox`, holding what an earlier process left); with
    `share`, one replica of several (it sweeps for orphaned work every `sweep_seconds`)."""
    inbox = inbox or MemoryInbox()
    history = MemoryHistory()
    outbox = MemoryOutbox(inbox, history)
    deliverer = RecordingDeliverer()
    limits = {"turns_per_person_per_minute": 0, **settings}
    host = Host(
        thinking=Thinking(make_assembler(counter, memory_enabled=False), model, no_tools),
        stores=HostStores(history, inbox, outbox, share=share),
        outlets=Outlets({"test": deliverer}),
        settings=HostSettings.model_validate(limits),
        resumers=resumers,
        sweep_seconds=sweep_seconds,
    )
    records: list[TurnRecord] = []
    host.observers.append(records.append)
    return Rig(host, model, inbox, outbox, history, deliverer, records)
