"""`bot run`: the long-running host, with graceful shutdown on SIGTERM and SIGINT."""

from __future__ import annotations

import argparse
import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config

HELP = "run the host: every enabled channel, cron and the HTTP port"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: the shutdown grace is `host.shutdown_grace` (or BOT_HOST__SHUTDOWN_GRACE)."""


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    return asyncio.run(_run(config))


async def _run(config: Config) -> int:
    import asyncio

    import structlog

    from bot.cli.compose import RUN, App

    log = structlog.get_logger(__name__)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():  # a second signal: leave now
            log.warning("shutdown_forced", signal=signal.Signals(signum).name)
            os._exit(130)
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    async with App(config, runs=RUN) as app:
        if not app.channels and not config.settings.cron.jobs:
            log.warning(
                "nothing_enabled",
                hint="enable [slack] or [telegram] in the config, or use `bot chat`",
            )
        log.info("host_ready", channels=[c.name for c in app.channels], port=app.http_port)
        await stop.wait()
        # Leaving the App stops the scheduler and webhooks, then lets running turns finish
        # (up to host.shutdown_grace) while channels can still deliver, then closes the rest.
    log.info("host_stopped")
    return 0
