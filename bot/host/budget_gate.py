"""The budget gate: no model call once a budget is reached (the turn is refused politely)."""

from __future__ import annotations

import structlog

from bot import replies
from bot.host.conclusions import Conclusion
from bot.host.pipeline import Turn
from bot.policy.budget import Budgets
from bot.ports.outbox import InboxState
from bot.turns import Outcome

log = structlog.get_logger(__name__)


class BudgetGate:
    """Refuse the turn before any model call when a budget is reached; the first refusal of a
    budget on a day tells the person, the rest stay quiet."""

    def __init__(self, budgets: Budgets) -> None:
        self._budgets = budgets

    async def __call__(self, turn: Turn) -> Conclusion | None:
        refusal = await self._budgets.check(turn.request, turn.policy.budget, turn.started)
        if refusal is None:
            return None
        log.info("turn_over_budget", budget=refusal.scope, notified=refusal.notify)
        reply = replies.budget_reached(refusal.scope, refusal.resets_at) if refusal.notify else ""
        record = turn.record(Outcome.OVER_BUDGET, error=f"budget:{refusal.scope}")
        return Conclusion(record, InboxState.REFUSED, reply, error=refusal.scope, private=True)
