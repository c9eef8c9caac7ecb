"""How a turn ends: the `Conclusion` a handler returns and the turn record.

A turn concludes (answered, or answered by the host), fails (the person is told, history keeps a
continuity account: `bot.host.continuity`), or suspends (answered, and waiting on something
outside it: it continues later as a continuation turn). The publisher stores a conclusion in one
publication.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot import tracing
from bot.policy.budget import surface_key
from bot.policy.surfaces import NO_POLICY, Policies, SurfacePolicy
from bot.ports.memory import MemoryCapture
from bot.ports.model import BudgetFacts
from bot.ports.outbox import InboxState
from bot.ports.records import TurnRecord, Usage
from bot.turns import Continuation, HistoryEntry, Outcome, TurnRequest

STOPPED = "stopped"  # a stopped turn's record and result error: a person stopped it
# Why a person stopped a turn, as its continuity account says it (`busy = "interrupt"`: SPEC §19).
BY_NEWER_MESSAGE = "a newer message interrupted it"


@dataclass(frozen=True, slots=True)
class Conclusion:
    """What ends a turn: its record, the inbox item's terminal state, what is said (the agent's
    answer when `answer`, else a host-written notice), the history `entries` it adds (or that
    replace history), and the memory `capture` of an answered exchange. `text` and `error`, when
    set, are what a caller waiting for the turn sees instead of what was said and the record's
    error. `opened`: the messages the turn's answer stream opened on the platform (index ->
    platform id), which delivery finishes instead of posting again."""

    record: TurnRecord
    state: InboxState
    say: str = ""
    answer: bool = False
    entries: Sequence[HistoryEntry] = ()
    replaces: bool = False
    capture: MemoryCapture | None = None
    text: str | None = None
    error: str | None = None
    opened: Mapping[int, str] = field(default_factory=dict)
    # Meant for the request's person alone (`/usage`, `/memory`, refusals): said where only they
    # see it when the platform can; else `public` is said in the open (None: `say` itself).
    private: bool = False
    public: str | None = None


def policy_of(policies: Policies | None, request: TurnRequest) -> SurfacePolicy:
    return policies.for_request(request) if policies is not None else NO_POLICY


def record(
    request: TurnRequest,
    started: datetime,
    outcome: Outcome,
    policy: SurfacePolicy,
    *,
    error: str | None = None,
    request_body: Mapping[str, object] | None = None,
    usage: Usage | None = None,
    attempts: int = 0,
    details: Mapping[str, object] | None = None,
) -> TurnRecord:
    """The turn's record, with where it happened, the surface rule that applied and its trace."""
    where: dict[str, object] = {"surface": surface_key(request)}
    if policy.rule is not None:
        where["surface_rule"] = policy.label
    found = tracing.trace_id()
    traced: dict[str, object] = {"trace_id": found} if found else {}
    return TurnRecord(
        turn_id=request.turn_id,
        conversation_key=request.conversation_key,
        channel=request.channel,
        started_at=started,
        finished_at=datetime.now(UTC),
        outcome=outcome,
        request=request_body,
        usage=usage or Usage(),
        attempts=attempts,
        error=error,
        details={**(details or {}), **where, **traced},
    )


def tool_details(calls: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """The turn's tool calls for its record (tool, arguments, result size, duration, outcome)."""
    return {"tool_calls": [dict(call) for call in calls]} if calls else {}


def budget_details(budget: BudgetFacts | None) -> dict[str, object]:
    """The budget's facts for the turn record ({} when no request was assembled)."""
    return budget.details() if budget is not None else {}


def suspended_details(suspended: Sequence[Continuation]) -> dict[str, object]:
    """What a suspended turn waits on, for its record."""
    return {"suspended": [{"kind": c.kind, "key": c.key} for c in suspended]}


def noted(notice: Sequence[str], text: str) -> str:
    """What is said: the host's lines about files it could not read, then the answer."""
    return "\n".join(notice) + "\n\n" + text if notice else text
