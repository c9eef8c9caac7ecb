"""Starting the channels: one whose platform cannot be reached at start (`ChannelUnavailable`:
unreachable, timing out, answering garbage) does not stop the host. It gets one clear log line,
is tried again in the background (0.5 s, doubling to 60 s) while the host serves the others, and
`/healthz` names it and says why until it is up. A refused token is still a ConfigError: that
one stops start-up, since trying again would change nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import structlog

from bot.errors import ChannelUnavailable
from bot.ports.intake import Channel, TurnSink

log = structlog.get_logger(__name__)

RETRY_FIRST = 0.5
RETRY_MAX = 60.0


class ChannelStarts:
    """The channels' start-up, and the retries of those that could not start yet."""

    def __init__(self, channels: Sequence[Channel], exits: contextlib.AsyncExitStack) -> None:
        self._channels = channels
        self._exits = exits
        self.problems: dict[str, str] = {}  # channel name -> why it is not started yet

    async def start(self, sink: TurnSink, *, intake: bool) -> None:
        for channel in self._channels:
            try:
                await channel.start(sink, intake=intake)
            except ChannelUnavailable as exc:
                self.problems[channel.name] = str(exc)
                log.error(
                    "channel_unavailable",
                    channel=channel.name,
                    error=str(exc),
                    retry_in=RETRY_FIRST,
                )
                task = asyncio.create_task(
                    self._keep_trying(channel, sink, intake), name=f"start:{channel.name}"
                )
                self._exits.push_async_callback(channel.stop)  # after the retries end
                self._exits.push_async_callback(_cancel, task)
                continue
            self._exits.push_async_callback(channel.stop)
            log.info("channel_started", channel=channel.name)

    async def _keep_trying(self, channel: Channel, sink: TurnSink, intake: bool) -> None:
        delay = RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
            try:
                await channel.start(sink, intake=intake)
            except ChannelUnavailable as exc:
                self.problems[channel.name] = str(exc)
                log.warning(
                    "channel_unavailable", channel=channel.name, error=str(exc), retry_in=delay
                )
                continue
            except Exception as exc:  # e.g. the token refused once it answered: stop trying
                self.problems[channel.name] = str(exc)
                log.error("channel_failed", channel=channel.name, error=str(exc))
                return
            del self.problems[channel.name]
            log.info("channel_started", channel=channel.name)
            return


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
