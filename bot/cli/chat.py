"""`bot chat`: an interactive (or piped) terminal conversation with the agent."""

from __future__ import annotations

import argparse
import asyncio

from bot.config import Config, LoggingSettings
from bot.logs import configure_logging

HELP = "talk to the agent in this terminal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--conversation",
        metavar="NAME",
        help="resume (or start) the named conversation console:NAME instead of a new one",
    )


def run(args: argparse.Namespace, config: Config) -> int:
    return asyncio.run(_chat(args.conversation, config))


async def _chat(name: str | None, config: Config) -> int:
    from bot.cli.compose import App, require_api_key
    from channels.console import ConsoleChannel, conversation_key

    require_api_key(config)
    # The terminal is the conversation: only warnings and errors go to stderr.
    level = config.settings.logging.level
    quiet = LoggingSettings(level=level if level in {"warning", "error"} else "warning")
    configure_logging(quiet, secrets=config.secrets)
    channel = ConsoleChannel(conversation_key(name))
    # check_model: a refused key is the operator's configuration error (exit 2, with the fix),
    # not an apology to the person typing.
    async with App(config, channels=False, http=False, check_model=True) as app:
        app.host.attach(channel.name, channel.deliverer)
        if channel.interactive:
            print(f"Conversation {channel.conversation}. Type /quit or Ctrl-D to leave.")
        await channel.start(app.host)
        await app.host.idle()
    return 0
