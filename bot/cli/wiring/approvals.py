"""Approvals wired in: the channels that show cards and take presses, the intake continuations
are submitted to, the MCP tools an approved call runs, and the sweep that expires requests and
submits again what a stopped process decided."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from bot.host import Host
from bot.ports.approvals import ApprovalCards
from bot.ports.intake import Channel
from bot.tools.approvals import ApprovalDesk

if TYPE_CHECKING:
    from bot.mcp.hub import McpHub

log = structlog.get_logger(__name__)

APPROVAL_SWEEP_SECONDS = 30.0  # how often pending approvals are checked for expiry


def connect_approvals(
    desk: ApprovalDesk,
    host: Host,
    channels: Sequence[Channel],
    hub: McpHub | None,
    *,
    sweeps: bool,
) -> Callable[[], Awaitable[None]]:
    """Connect the desk and start its sweep where `sweeps` (a process that runs what it accepts:
    another one's continuations would wait for its next start); returns what stops the sweep."""
    cards = {c.name: c for c in channels if isinstance(c, ApprovalCards)}
    for channel in cards.values():
        channel.use_approvals(desk)
    desk.connect(host, cards, hub.tools if hub is not None else tuple)
    sweep = asyncio.create_task(_approval_sweep(desk)) if sweeps else None

    async def stop_sweep() -> None:
        if sweep is None:
            return
        sweep.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweep

    return stop_sweep


async def _approval_sweep(desk: ApprovalDesk) -> None:
    """At start, then every APPROVAL_SWEEP_SECONDS: recover, then expire what is due."""
    while True:
        try:
            await desk.recover()
            await desk.expire_due()
        except Exception as exc:  # the store is down for now: the next sweep tries again
            log.warning("approval_sweep_failed", error=type(exc).__name__)
        await asyncio.sleep(APPROVAL_SWEEP_SECONDS)
