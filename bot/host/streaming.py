"""Streaming one answer into live platform messages while the model writes it (SPEC §7).

`AnswerStream` takes the model's text deltas and decides, with no knowledge of any platform:

- **when to open** a message: as soon as the first visible text arrives (the progress sign goes
  when it does);
- **when to update** it: at most once per the session's `interval`, never on the model's path
  (deltas only wake a background flusher, so a slow platform never slows the model);
- **where the answer continues**: each update renders the whole text so far with the deliverer's
  own `render` (the very split of non-streamed answers); when that gives one more part than
  messages are open, the current message is sealed and the next one opened, in order;
- **when it ends**: when the model is done (`close`) the session is told the whole text of its
  last message (`LiveSession.ended`: a terminal prints what it has not printed yet).

What the live messages show is a preview: after the turn's publication, delivery finishes every
opened message with its final part's text (`Deliverer.finish`), so the final messages are
exactly the non-streamed render, however the deltas were chunked. Every platform id a message
gets is recorded in the outbox at once (`Outbox.opened`), so a turn run again after a crash
reuses the messages instead of showing the answer twice; `close` returns them all, for the
turn's publication (kept even when recording one failed).

A session refused by the platform (StreamRefused) ends streaming for the turn; what was shown
stays and is finished by delivery, and when nothing was shown the answer is posted as usual. A
rate-limited update (StreamBusy) waits as long as the platform asks, up to `MAX_BUSY_WAIT`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from bot.errors import StreamBusy, StreamRefused
from bot.ports.delivery import LiveSession, LiveView, Step
from bot.ports.outbox import Outbox
from bot.turns import ToolResultBlock, ToolUseBlock

log = structlog.get_logger(__name__)

MAX_BUSY_WAIT = 30.0  # the longest pause a rate limit imposes on a live preview

Render = Callable[[str], list[str]]


@dataclass
class _Live:
    """One message the stream opened: its platform id (when it has one), where its Markdown
    starts in the answer, and what it shows."""

    platform_id: str | None
    start: int
    shown: str


class AnswerStream:
    """The live preview of one turn's answer; `on_text` is the model runtime's delta hook."""

    def __init__(self, session: LiveSession, render: Render, outbox: Outbox, turn_id: str) -> None:
        self._session = session
        self._render = render
        self._outbox = outbox
        self._turn_id = turn_id
        self._ids: dict[int, str] = {}
        self._text = ""
        self._live: list[_Live] = []
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[bool] | None = None
        self._stopped = False
        self._steps: list[Step] = []  # tool calls' news not shown yet
        self._tools: dict[str, str] = {}  # call id -> tool name
        self._steps_off = False  # the session shows no steps (or refused them)

    def on_tool(self, block: ToolUseBlock | ToolResultBlock) -> None:
        """The model runtime's tool hook: a call starting, or its result. Shown as a step by the
        background flusher, never on the model's path."""
        if self._stopped or self._steps_off:
            return
        if isinstance(block, ToolUseBlock):
            self._tools[block.id] = block.name
            self._steps.append(Step(block.id, block.name, "in_progress"))
        else:
            name = self._tools.get(block.tool_use_id, "tool")
            ended = Step(block.tool_use_id, name, "error" if block.is_error else "complete")
            self._steps.append(ended)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="answer-stream")
        self._changed.set()

    async def on_text(self, delta: str) -> None:
        if self._stopped:
            return
        self._text += delta
        if self._task is None:
            if not self._text.strip():
                return
            self._task = asyncio.create_task(self._run(), name="answer-stream")
        self._changed.set()

    async def close(self) -> Mapping[int, str]:
        """Stop updating (the model is done): an update under way finishes, none starts, and
        the session is told the whole text. The messages opened: index -> platform id."""
        refused = self._stopped
        self._stopped = True
        self._closing.set()
        self._changed.set()
        if self._task is not None:
            refused = await self._task
        if self._live and not refused:
            await self._end()
        return dict(self._ids)

    async def _end(self) -> None:
        index = len(self._live) - 1
        current = self._live[index]
        parts = self._render(self._text)
        formatted = parts[index] if index < len(parts) else current.shown
        view = LiveView(formatted, self._text[current.start :])
        try:
            await self._session.ended(index, current.platform_id, view)
        except Exception as exc:  # a preview is never worth failing the turn
            log.warning("stream_end_failed", error=type(exc).__name__, detail=str(exc))

    async def _run(self) -> bool:
        """Update until closed; True when the platform refused the stream."""
        while True:
            await self._changed.wait()
            if self._closing.is_set():
                return False
            self._changed.clear()
            try:
                await self._step()
                pause = self._session.interval
            except StreamRefused as exc:
                log.info("stream_refused", shown=len(self._live), reason=str(exc))
                self._stopped = True
                return True
            except StreamBusy as busy:
                pause = min(max(busy.retry_after, self._session.interval), MAX_BUSY_WAIT)
                log.info("stream_rate_limited", wait=pause)
            except Exception as exc:  # a preview is never worth failing the turn
                log.warning("stream_update_failed", error=type(exc).__name__, detail=str(exc))
                pause = self._session.interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), pause)

    async def _step(self) -> None:
        """One update: open the first message, or seal the current one and open the next
        when the render has moved on, or show the current one's new text (after the tool calls'
        news, first)."""
        if self._steps:
            await self._show_steps()
        parts = self._render(self._text)
        if not parts:
            return
        if not self._live:
            await self._open(0, parts[0])
            return
        index = len(self._live) - 1
        current = self._live[index]
        if len(parts) > len(self._live):
            view = LiveView(parts[index], self._text[current.start :])
            sealed = await self._session.seal(index, current.platform_id, view)
            if sealed is not None and sealed != current.platform_id:
                current.platform_id = sealed
                await self._opened(index, sealed)
            await self._open(index + 1, parts[index + 1])
        elif parts[index] != current.shown:
            view = LiveView(parts[index], self._text[current.start :])
            await self._session.show(index, current.platform_id, view)
            current.shown = parts[index]

    async def _show_steps(self) -> None:
        """Show the tool calls' news in the current message (opening the first for them)."""
        steps, self._steps = self._steps, []
        index = max(len(self._live) - 1, 0)
        current = self._live[index] if self._live else None
        first = self._live[0].platform_id if self._live else None
        try:
            shown = await self._session.steps(
                index, current.platform_id if current else None, first, steps
            )
        except StreamBusy:
            self._steps = steps + self._steps  # shown at the next update
            raise
        except Exception as exc:  # steps are a nicety: the answer still streams
            log.info("stream_steps_refused", error=type(exc).__name__, detail=str(exc))
            shown = None
        if shown is None:
            self._steps_off = True
        elif current is None:
            self._live.append(_Live(shown, 0, ""))
            await self._opened(0, shown)

    async def _open(self, index: int, formatted: str) -> None:
        start = 0 if index == 0 else len(self._text)
        first = self._live[0].platform_id if self._live else None
        view = LiveView(formatted, self._text[start:])
        platform_id = await self._session.open(index, first, view)
        self._live.append(_Live(platform_id, start, formatted))
        if platform_id is not None:
            await self._opened(index, platform_id)

    async def _opened(self, index: int, platform_id: str) -> None:
        self._ids[index] = platform_id
        try:
            await self._outbox.opened(self._turn_id, index, platform_id)
        except Exception as exc:  # kept here: this run still finishes it, not posts it again
            log.warning("stream_record_failed", error=type(exc).__name__)
