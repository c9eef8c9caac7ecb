"""A TurnSink for channel tests: records what a channel submits, deduplicates its marks the way
the host's inbox does, and answers with an admission the test sets (ACCEPTED, BUSY, CLOSED...)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.errors import IntakeUnavailable
from bot.ports import Admission, TurnResult
from bot.turns import TurnRequest


class RecordingSink:
    def __init__(self, answer: Admission = Admission.ACCEPTED) -> None:
        self.requests: list[TurnRequest] = []
        self.marks: set[tuple[str, str]] = set()
        self.answer = answer

    async def submit(self, request: TurnRequest, *, source: str, marks: Sequence[str]) -> Admission:
        if not self.answer.acknowledge:
            return self.answer  # not stored: nothing recorded, no mark
        if not self._mark(source, marks):
            return Admission.DUPLICATE
        self.requests.append(request)
        return self.answer

    async def note(self, *, source: str, marks: Sequence[str]) -> bool:
        if not self.answer.acknowledge:
            raise IntakeUnavailable(self.answer.value, closing=self.answer is Admission.CLOSED)
        return self._mark(source, marks)

    async def run(self, request: TurnRequest) -> TurnResult:
        raise AssertionError("a push channel submits; it never waits for a turn")

    def _mark(self, source: str, marks: Sequence[str]) -> bool:
        keys = {(source, mark) for mark in marks}
        new = not keys & self.marks
        self.marks |= keys
        return new
