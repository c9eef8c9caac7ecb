"""The console channel: `bot chat` in a terminal, through the same host as every other channel.

Interactive on a terminal (a prompt, answers streamed as they arrive); with piped standard input it
reads one message per line and prints one answer per message, so it can be scripted.

On a terminal, lines are read with GNU readline (editing, history, and no 4,096-byte cut that the
terminal's own line mode makes to a long paste), a progress sign shows while a turn has produced
nothing yet, and `interrupt()` (Ctrl-C, wired by `bot chat`) leaves at once at the prompt; during
a turn the first one says the answer is being finished, the second cancels it. Input is read on a
daemon thread, so leaving never waits for a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TextIO

from bot import replies
from bot.errors import PartFailed
from bot.ports.delivery import Deliverer, LiveSession, LiveView
from bot.ports.intake import TurnResult, TurnSink
from bot.ports.outbox import OutboxPart
from bot.turns import ConversationKind, Outcome, ReplyRoute, TurnRequest

PLATFORM = "console"
PROMPT = "you> "
QUIT = {"/quit", "/exit"}
_ERASE_LINE = "\r\x1b[K"


def conversation_key(name: str | None) -> str:
    """`console:<name>` for a named (resumable) conversation, else a fresh `console:<uuid>`."""
    return f"console:{name or uuid.uuid4()}"


class ConsoleDeliverer(Deliverer):
    """Writes answers to the terminal: an answer is one part; a streamed one is printed as the
    model writes it (`live`), then finished with a line end."""

    def __init__(self, out: TextIO, *, progress: bool = False) -> None:
        self._out = out
        self._terminal = uuid.uuid4().hex  # this process's output: routes carry it
        self._shown: dict[str, str] = {}  # what each live message printed so far, by its id
        self._progress = progress  # a terminal: show a sign while nothing has arrived yet
        self._sign_shown = False
        self.gone = False  # whoever read the output closed it (`bot chat | head -1`)

    def route(self, turn_id: str) -> ReplyRoute:
        """Where a turn's answer goes: this terminal."""
        return ReplyRoute(PLATFORM, {"turn_id": turn_id, "terminal": self._terminal})

    def route_to(self, destination: str) -> ReplyRoute:
        return self.route(destination)

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return [text]  # a terminal takes any length, as written

    async def post(self, part: OutboxPart, first: str | None) -> str:
        self._check(part)
        self._erase_sign()
        self.write(part.text + "\n")
        self._check(part)
        return part.part_id

    def live(self, route: ReplyRoute, turn_id: str) -> LiveSession:
        return _ConsoleLive(self, turn_id)

    async def finish(self, part: OutboxPart, first: str | None) -> str:
        """End a streamed answer: what the stream did not print yet (when the answer goes on
        from what it printed), then the line end. A terminal cannot take back what it showed."""
        self._check(part)
        shown = self._shown.pop(part.platform_id or "", "")
        rest = part.text[len(shown) :] if part.text.startswith(shown) else ""
        self.write(rest + "\n")
        self._check(part)
        return part.part_id

    def _check(self, part: OutboxPart) -> None:
        if part.route.values.get("terminal") != self._terminal:
            raise PartFailed("the terminal that asked is gone (an earlier `bot chat`)")
        if self.gone:
            raise PartFailed("nobody reads the output any more")

    def print_live(self, platform_id: str, text: str) -> None:
        """Show a live message's text: the part of it not printed yet."""
        self._erase_sign()
        shown = self._shown.get(platform_id, "")
        self._shown[platform_id] = text
        self.write(text[len(shown) :] if text.startswith(shown) else text)

    @asynccontextmanager
    async def working(self, route: ReplyRoute) -> AsyncIterator[None]:
        if self._progress:
            self.write(replies.CONSOLE_THINKING)
            self._sign_shown = True
        try:
            yield
        finally:
            self._erase_sign()

    def write(self, text: str) -> None:
        """Write and flush; a closed output marks the deliverer gone instead of raising."""
        if self.gone:
            return
        try:
            self._out.write(text)
            self._out.flush()
        except BrokenPipeError:
            self.gone = True

    def _erase_sign(self) -> None:
        if self._sign_shown:
            self._sign_shown = False
            self.write(_ERASE_LINE)


class _ConsoleLive(LiveSession):
    """A turn's answer printed as it is written: the terminal has one message, never full."""

    def __init__(self, console: ConsoleDeliverer, turn_id: str) -> None:
        self._console = console
        self._id = f"{turn_id}.0"

    @property
    def interval(self) -> float:
        return 0.0  # a terminal takes every update

    async def open(self, index: int, first: str | None, view: LiveView) -> str:
        self._console.print_live(self._id, view.formatted)
        return self._id

    async def show(self, index: int, platform_id: str | None, view: LiveView) -> None:
        self._console.print_live(self._id, view.formatted)

    async def seal(self, index: int, platform_id: str | None, view: LiveView) -> str:
        return self._id  # `render` never splits: not reached

    async def ended(self, index: int, platform_id: str | None, view: LiveView) -> None:
        self._console.print_live(self._id, view.formatted)


# Outcomes after which the person got no answer from the model (an apology or a notice at most).
_UNANSWERED = frozenset(
    {
        Outcome.FAILED,
        Outcome.CRASHED,
        Outcome.REFUSED,
        Outcome.OVER_BUDGET,
        Outcome.BUSY,
        Outcome.RATE_LIMITED,
        Outcome.CLOSED,
    }
)
_REASON_MAX = 300


def _one_line(reason: str) -> str:
    line = " ".join(reason.split()).rstrip(".")
    return line if len(line) <= _REASON_MAX else line[: _REASON_MAX - 1] + "…"


class ConsoleChannel:
    """Reads lines, runs each as a turn and waits for its answer before reading the next."""

    name = PLATFORM
    files = None  # nothing to download: a terminal shares no files
    connected = True  # a terminal is always there

    def __init__(
        self,
        conversation: str,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        note: str | None = None,
    ) -> None:
        """`note`: a line shown under the greeting on a terminal (where the log goes)."""
        self.conversation = conversation
        self._note = note
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._clock = clock
        self.interactive = self._in.isatty()
        self.deliverer = ConsoleDeliverer(self._out, progress=self._out.isatty())
        self.interrupted = False
        self._leaving = asyncio.Event()
        self._turn: asyncio.Task[TurnResult] | None = None
        self._finishing = False
        self._conversing: asyncio.Task[None] | None = None
        self.asked = 0  # messages run as turns
        self.unanswered: list[str] = []  # why each message that got no answer got none
        self.unanswered_turn = ""  # the turn id of the last one (what `bot turns show` takes)
        # The input thread reads (and so prompts) only when a line is wanted: a prompt shown
        # while an answer is printed would be erased with the progress sign, and readline's
        # idea of the line would no longer match the screen.
        self._wanted = threading.Semaphore(0)
        self._asking = False

    def request(self, text: str) -> TurnRequest:
        turn_id = uuid.uuid4().hex
        return TurnRequest(
            conversation_key=self.conversation,
            kind=ConversationKind.CONSOLE,
            channel=PLATFORM,
            text=text,
            received_at=self._clock(),
            turn_id=turn_id,
            route=self.deliverer.route(turn_id),
        )

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        """Greet (on a terminal) and start the conversation; `finished()` waits for its end."""
        if not intake:
            return
        if self.interactive:
            self._out.write(f"Conversation {self.conversation}. Type /quit or Ctrl-D to leave.\n")
            if self._note:
                self._out.write(self._note + "\n")
            self._out.flush()
        self._conversing = asyncio.ensure_future(self._converse(sink))

    async def finished(self) -> None:
        """Wait until end of input, /quit or an interrupt at the prompt."""
        if self._conversing is not None:
            await asyncio.shield(self._conversing)

    async def _converse(self, sink: TurnSink) -> None:
        lines = self._read_lines()
        while (line := await self._next(lines)) is not None:
            text = line.strip()
            if not text:
                continue
            if text in QUIT:
                break
            request = self.request(text)
            self._turn = asyncio.ensure_future(sink.run(request))
            self._finishing = False
            try:
                result = await asyncio.shield(self._turn)
            finally:
                self._turn = None
            self.asked += 1
            if result.outcome in _UNANSWERED:
                self.unanswered.append(_one_line(result.error or str(result.outcome)))
                self.unanswered_turn = request.turn_id
            self._explain(result)
            if self.interrupted or self.deliverer.gone:
                break  # nobody reads the answers: the rest of the input is not worth a model call

    async def stop(self) -> None:
        self._leaving.set()
        if self._conversing is not None:
            await self._conversing

    def interrupt(self) -> bool:
        """Ctrl-C. At the prompt: leave now. During a turn: the first says the answer is being
        finished, the second returns True (the caller cancels the turn) and leaves after it."""
        if self._turn is None:
            self.interrupted = True
            self._leaving.set()
            return False
        if not self._finishing:
            self._finishing = True
            self._say(replies.CONSOLE_FINISHING)
            return False
        self.interrupted = True
        self._say(replies.CONSOLE_CANCELLING)
        return True

    def _say(self, note: str) -> None:
        self.deliverer._erase_sign()
        self.deliverer.write("\n" + note + "\n")

    async def _next(self, lines: asyncio.Queue[str | None]) -> str | None:
        """The next line, or None at end of input or when leaving (whichever comes first)."""
        if self._leaving.is_set():
            return None
        if not self._asking:
            self._asking = True
            self._wanted.release()
        reading = asyncio.ensure_future(lines.get())
        leaving = asyncio.ensure_future(self._leaving.wait())
        await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
        leaving.cancel()
        if not reading.done():
            reading.cancel()
            return None
        self._asking = False
        return reading.result()

    def _read_lines(self) -> asyncio.Queue[str | None]:
        """Lines from standard input, read on a daemon thread one at a time, each when `_next`
        asks for it (None at end of input)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def read() -> None:
            while True:
                self._wanted.acquire()
                line = self._read_one()
                loop.call_soon_threadsafe(queue.put_nowait, line)
                if line is None:
                    return

        threading.Thread(target=read, name="console-input", daemon=True).start()
        return queue

    def _read_one(self) -> str | None:
        if not self.interactive:
            return self._in.readline() or None
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (input() then edits lines and takes long pastes)
        try:
            return input(PROMPT) + "\n"
        except (EOFError, KeyboardInterrupt):
            return None

    def _explain(self, result: TurnResult) -> None:
        if result.outcome in {Outcome.BUSY, Outcome.RATE_LIMITED}:
            return  # the host already answered politely
        if result.outcome == Outcome.CLOSED:
            self.deliverer.write("(the host is shutting down)\n")
