"""`bot chat`: an interactive (or piped) terminal conversation with the agent."""

from __future__ import annotations

import argparse
import atexit
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot import replies

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config

HELP = "talk to the agent in this terminal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--conversation",
        metavar="NAME",
        type=_conversation_name,
        help="resume (or start) the named conversation console:NAME instead of a new one",
    )


NAME_MAX_CHARS = 200


def _conversation_name(name: str) -> str:
    """The NAME of `console:NAME`, the key `bot history` lists: one line, printable, bounded."""
    if len(name) > NAME_MAX_CHARS or not name.isprintable():
        raise argparse.ArgumentTypeError(
            f"{name[:40]!r} cannot name a conversation (a line break, a control character, or "
            f"over {NAME_MAX_CHARS} characters). Fix: use a short name of printable characters."
        )
    return name


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    return asyncio.run(_chat(args.conversation, config))


async def _chat(name: str | None, config: Config) -> int:
    import asyncio

    from bot.cli.compose import CHAT, App, ready, require_api_key
    from channels.console import ConsoleChannel, conversation_key

    require_api_key(config)
    # Warnings and errors go to a file beside the database: on a terminal a retry warning would
    # land mid-answer, and a piped chat's stderr is the one line a script reads when it failed.
    interactive = sys.stdin.isatty()
    log_file = _quiet_logging(config)
    note = f"(warnings and errors go to {log_file})" if interactive else None
    channel = ConsoleChannel(conversation_key(name), note=note)
    # CHAT checks the model: a refused key is the operator's configuration error (exit 2, with
    # the fix), not an apology to the person typing.
    async with App(config, [ready(channel)], CHAT) as app:
        closing: set[asyncio.Task[None]] = set()

        async def stop_turn() -> None:
            # The host's stop (Slack's stop button takes it too): the turn ends, the conversation
            # keeps its continuity account. A turn not yet at its model call is cut by closing.
            if not await app.host.cancel(channel.conversation):
                await app.host.close(grace=0)

        def on_interrupt() -> None:
            if channel.interrupt():  # a second Ctrl-C during a turn: cancel it cleanly
                task = asyncio.ensure_future(stop_turn())
                closing.add(task)
                task.add_done_callback(closing.discard)

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
        try:
            await channel.finished()
            await app.host.idle()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    if channel.interrupted:
        print()
        return 130
    if channel.unanswered and not channel.interactive:  # a script must be able to tell
        print(
            replies.chat_unanswered(
                len(channel.unanswered),
                channel.asked,
                channel.unanswered[-1],
                log_file,
                turn_id=channel.unanswered_turn,
                conversation=channel.conversation,
            ),
            file=sys.stderr,
        )
        return 1
    return 0


def _quiet_logging(config: Config) -> Path:
    """The terminal is the conversation: only warnings and errors are logged, to a file beside
    the database."""
    from bot.config import LoggingSettings
    from bot.logs import configure_logging

    level = config.settings.logging.level
    quiet = LoggingSettings(
        level=level if level in {"warning", "error"} else "warning", format="json"
    )
    path = config.settings.store.path.parent / "chat.log"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    stream = path.open("a", encoding="utf-8")
    atexit.register(stream.close)
    configure_logging(quiet, secrets=config.secrets, stream=stream)
    return path
