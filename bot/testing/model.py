"""A scripted model runtime (port: `bot.ports.model.ModelRuntime`): each turn takes the next
step of its script (an outcome to return, or an error to raise; the last step repeats), and every
plan it was handed is kept for the test to read. With `gated`, each turn announces itself on
`started` and waits for `release`, so a test can hold a turn in the model while it looks at the
host: tests wait on events, never on time.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bot.ports.model import ModelRuntime, TurnOutcome, TurnPlan
from bot.turns import HistoryEntry, TextBlock

Step = TurnOutcome | Exception


def answer(text: str) -> TurnOutcome:
    """An outcome whose one new entry is the assistant saying `text`."""
    said = HistoryEntry("assistant", (TextBlock(text),), at=datetime.now(UTC))
    return TurnOutcome(text=text, entries=(said,))


class ScriptedModel(ModelRuntime):
    """The ModelRuntime port, answering from a script (`answer("scripted answer")` by default)."""

    def __init__(self, *script: Step, gated: bool = False) -> None:
        self.script: list[Step] = list(script) or [answer("scripted answer")]
        self.gated = gated
        self.plans: list[TurnPlan] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.closed = False

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        step = self.script[min(len(self.plans), len(self.script) - 1)]
        self.plans.append(plan)
        if self.gated:
            self.started.set()
            await self.release.wait()
        if isinstance(step, Exception):
            raise step
        return step

    async def aclose(self) -> None:
        self.closed = True
