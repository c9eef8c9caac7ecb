"""The console channel: `bot chat` in a terminal, through the same host as every other channel.

Interactive on a terminal (a prompt, answers streamed as they arrive); with piped standard input it
reads one message per line and prints one answer per message, so it can be scripted.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TextIO

from bot.ports import Admission, DeliveryReport, TurnResult, TurnSink
from bot.turns import ConversationKind, ReplyRoute, TurnRequest

PLATFORM = "console"
PROMPT = "you> "
QUIT = {"/quit", "/exit"}


def conversation_key(name: str | None) -> str:
    """`console:<name>` for a named (resumable) conversation, else a fresh `console:<uuid>`."""
    return f"console:{name or uuid.uuid4()}"


class ConsoleDeliverer:
    """Writes answers to the terminal; streamed deltas are shown as they arrive."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._streamed: set[str] = set()

    async def stream(self, route: ReplyRoute, delta: str) -> None:
        self._streamed.add(str(route.values.get("turn_id")))
        self._out.write(delta)
        self._out.flush()

    async def deliver(self, route: ReplyRoute, text: str) -> DeliveryReport:
        turn_id = str(route.values.get("turn_id"))
        if turn_id in self._streamed:
            self._streamed.discard(turn_id)
            self._out.write("\n")
        else:
            self._out.write(text + "\n")
        self._out.flush()
        return DeliveryReport(parts=1, accepted=1)

    @asynccontextmanager
    async def working(self, route: ReplyRoute) -> AsyncIterator[None]:
        yield

    def route_to(self, destination: str) -> ReplyRoute:
        return ReplyRoute(PLATFORM, {"turn_id": destination})


class ConsoleChannel:
    """Reads lines, runs each as a turn and waits for its answer before reading the next."""

    name = PLATFORM

    def __init__(
        self,
        conversation: str,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.conversation = conversation
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._clock = clock
        self.deliverer = ConsoleDeliverer(self._out)
        self.interactive = self._in.isatty()

    def request(self, text: str) -> TurnRequest:
        turn_id = uuid.uuid4().hex
        return TurnRequest(
            conversation_key=self.conversation,
            kind=ConversationKind.CONSOLE,
            channel=PLATFORM,
            text=text,
            received_at=self._clock(),
            turn_id=turn_id,
            route=ReplyRoute(PLATFORM, {"turn_id": turn_id}),
        )

    async def start(self, sink: TurnSink) -> None:
        """Run the conversation until end of input (or /quit)."""
        async for line in self._lines():
            text = line.strip()
            if not text:
                continue
            if text in QUIT:
                break
            result = await sink.run(self.request(text))
            self._explain(result)

    async def stop(self) -> None:
        return None

    async def _lines(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        while True:
            if self.interactive:
                self._out.write(PROMPT)
                self._out.flush()
            line = await loop.run_in_executor(None, self._in.readline)
            if not line:
                return
            yield line

    def _explain(self, result: TurnResult) -> None:
        if result.outcome in {Admission.BUSY.value, Admission.RATE_LIMITED.value}:
            return  # the host already answered politely
        if result.outcome == Admission.CLOSED.value:
            self._out.write("(the host is shutting down)\n")
