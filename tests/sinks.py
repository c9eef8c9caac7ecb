"""A TurnSink for channel tests: records what a channel submits, deduplicates its marks the way
the host's inbox does (or through a real inbox, which also empties the chat buffer a stored turn
consumes), and answers with an admission the test sets (ACCEPTED, BUSY, CLOSED...).

`stored` is what the channel submitted (what the inbox would hold); `requests` is the same with
the names `look_up` found for its lookups (the channel's `RequestCompleter`, when a test sets it),
as a turn would see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bot.errors import IntakeUnavailable
from bot.ports.history import Chatter
from bot.ports.intake import Admission, Inbox, TurnResult
from bot.turns import Lookups, Names, TurnRequest


class RecordingSink:
    def __init__(self, answer: Admission = Admission.ACCEPTED, inbox: Inbox | None = None) -> None:
        self.requests: list[TurnRequest] = []
        self.stored: list[TurnRequest] = []
        self.look_up: Callable[[Lookups], Awaitable[Names]] | None = None
        self.marks: set[tuple[str, str]] = set()
        self.chatter: list[Chatter] = []  # kept messages noted (without an inbox)
        self.unwritten = 0  # notes the inbox could not write
        self.answer = answer
        self._inbox = inbox

    async def submit(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> Admission:
        if not self.answer.acknowledge:
            return self.answer  # not stored: nothing recorded, no mark
        if self._inbox is not None:
            item = await self._inbox.accept(request, source=source, marks=marks, consumes=consumes)
            if item is None:
                return Admission.DUPLICATE
        elif not self._mark(source, marks):
            return Admission.DUPLICATE
        self.stored.append(request)
        if self.look_up is not None and request.lookups is not None:
            request = request.named(await self.look_up(request.lookups))
        self.requests.append(request)
        return self.answer

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        if not self.answer.acknowledge:
            raise IntakeUnavailable(self.answer.value, closing=self.answer is Admission.CLOSED)
        if self._inbox is not None:
            try:
                return await self._inbox.note(source=source, marks=marks, chatter=chatter)
            except Exception as exc:  # as the host says it: not stored, do not acknowledge
                self.unwritten += 1
                raise IntakeUnavailable(type(exc).__name__) from None
        new = self._mark(source, marks)
        if new and chatter is not None:
            self.chatter.append(chatter)
        return new

    async def run(self, request: TurnRequest) -> TurnResult:
        raise AssertionError("a push channel submits; it never waits for a turn")

    def _mark(self, source: str, marks: Sequence[str]) -> bool:
        keys = {(source, mark) for mark in marks}
        new = not keys & self.marks
        self.marks |= keys
        return new
