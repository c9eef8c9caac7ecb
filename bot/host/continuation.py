"""The continuation handler: a turn that carries on a suspended one (DESIGN §3).

A continuation request (`TurnRequest.continues`) is handed to the resumer of its kind inside its
conversation's lane; the note it returns (what happened: the approved call's result, a refusal,
an expiry) becomes the request's text, and the turn goes on to the model, which tells the person.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import structlog

from bot import replies
from bot.host.answering import Answering
from bot.host.conclusions import Conclusion
from bot.host.pipeline import Turn
from bot.ports.intake import Resumer
from bot.ports.outbox import InboxState
from bot.turns import Outcome

log = structlog.get_logger(__name__)


class Continuing:
    """Resume what a suspended turn waited for, then pass the turn on with the outcome."""

    def __init__(self, resumers: Mapping[str, Resumer], answering: Answering) -> None:
        self._resumers = dict(resumers)
        self._answering = answering

    async def __call__(self, turn: Turn) -> Conclusion | None:
        continues = turn.request.continues
        if continues is None:
            return None
        resumer = self._resumers.get(continues.kind)
        if resumer is None:
            log.error("continuation_unknown", kind=continues.kind)
            error = f"no resumer for {continues.kind!r} continuations"
            return Conclusion(
                turn.record(Outcome.FAILED, error=error), InboxState.FAILED, replies.TURN_FAILED
            )
        async with self._answering.working(turn.request.route):
            note = await resumer.resume(turn.request, continues)
        turn.request = replace(turn.request, text=note)  # what the model reads of the outcome
        return None
