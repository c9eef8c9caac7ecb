"""Running the tools one model answer asks for: each call traced, bounded and logged, its
failure turned into an error result the model reads, and a line for the turn record."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from bot import tracing
from bot.errors import ToolError
from bot.logs import redact_text
from bot.model.tooloutput import bound_tool_output
from bot.ports.tools import Tool, ToolImage, ToolOutput
from bot.turns import Continuation, ToolResultBlock, ToolUseBlock

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class ToolRound:
    """One round's results in call order, the images they returned (by tool_use id: this
    round's request carries them; later requests replay the results' text only), and what the
    calls suspend the turn for (a call waiting for an approval)."""

    results: list[ToolResultBlock] = field(default_factory=list)
    images: dict[str, tuple[ToolImage, ...]] = field(default_factory=dict)
    suspended: list[Continuation] = field(default_factory=list)


async def run_tools(
    calls: Sequence[ToolUseBlock],
    offered: Sequence[Tool],
    records: list[dict[str, Any]],
    turn_id: str,
    on_tool: Callable[[ToolUseBlock | ToolResultBlock], None] | None = None,
) -> ToolRound:
    """Run `calls` one after another; each call's line for the turn record is appended to
    `records` as soon as it ends, and `on_tool` hears each call as it starts and its result as
    it ends."""
    tools = {tool.spec.name: tool for tool in offered}
    done = ToolRound()
    for call in calls:
        if on_tool is not None:
            on_tool(call)
        result = await _run_tool(call, tools, done, records, turn_id)
        if on_tool is not None:
            on_tool(result)
        done.results.append(result)
    return done


async def _run_tool(
    call: ToolUseBlock,
    tools: Mapping[str, Tool],
    done: ToolRound,
    records: list[dict[str, Any]],
    turn_id: str,
) -> ToolResultBlock:
    tool = tools.get(call.name)
    began = time.monotonic()
    marked: ToolOutput | None = None  # a result that says more than ok
    with tracing.span(
        f"execute_tool {call.name}",
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name=call.name,
        gen_ai__tool__call__id=call.id,
    ) as span:
        if tool is None:  # not offered here (or invented): it reaches no server
            known = ", ".join(sorted(tools)) or "none"
            output, failed = f"unknown tool {call.name!r}; the tools here are: {known}", True
            log.warning("tool_refused", tool=call.name, turn_id=turn_id)
        else:
            try:
                returned = await tool(call.input)
                if isinstance(returned, ToolOutput):
                    output, failed = returned.text, False
                    done.images[call.id] = returned.images
                    marked = returned
                else:
                    output, failed = str(returned), False
            except ToolError as exc:
                output, failed = str(exc) or type(exc).__name__, True
            except Exception as exc:  # any tool bug becomes an error result, not a lost turn
                output, failed = f"the tool failed: {type(exc).__name__}: {exc}", True
        # Any tool's output (a server's, or an error's text) may carry a secret the host knows:
        # it goes to the model and into history, so it is redacted like a log line.
        content = bound_tool_output(redact_text(output))
        size = len(content.encode("utf-8", errors="replace"))
        span.set(bot__ok=not failed, bot__result_bytes=size)
        if failed:
            span.failed("the tool call failed")
    latency_ms = round((time.monotonic() - began) * 1000, 1)
    log.info(
        "tool_call",
        tool=call.name,
        ok=not failed,
        result_bytes=size,
        latency_ms=latency_ms,
        turn_id=turn_id,
    )
    outcome = "refused" if tool is None else "error" if failed else "ok"
    if marked is not None and marked.outcome is not None and not failed:
        outcome = marked.outcome
    if marked is not None and marked.suspends is not None and not failed:
        done.suspended.append(marked.suspends)
    records.append(
        {
            "tool": call.name,
            "arguments": call.input,
            "result_bytes": size,
            "duration_ms": latency_ms,
            "outcome": outcome,
            **(dict(marked.facts) if marked is not None else {}),
        }
    )
    return ToolResultBlock(call.id, content, is_error=failed)
