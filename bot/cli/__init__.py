"""The `bot` command: parses the command line and hands over to one command module.

Each command group lives in its own module (`bot/cli/<group>.py`) exposing `HELP`,
`add_arguments(parser)` and `run(args, config) -> int`, and is listed in `COMMANDS` below.

Starting fast (every `bot COMMAND --help` within 150 ms) rests on one rule for those modules:
**at the top, import only the standard library (not asyncio: a fifth of a --help) and our
SDK-free modules** (`bot.turns`, `bot.errors`, `bot.ports.*`, `bot.replies`, `bot.cli.stored`);
names needed only in annotations go under `if TYPE_CHECKING:`; everything else (asyncio;
`bot.cli.settings` and `bot.config`, which load pydantic; `bot.cli.compose`; `bot.logs`; any
SDK: anthropic, openai, mcp, slack_bolt, telegram) is imported inside the function that runs
it. `main` imports only the chosen command's module, and loads the config after parsing.
`tests/cli/test_startup.py` checks every command in `COMMANDS` (a new one included) by what its
--help leaves in `sys.modules`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Protocol, cast

# command name -> (module, one-line help). The help lives here too so `bot --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "chat": ("bot.cli.chat", "talk to the agent in this terminal"),
    "run": ("bot.cli.run", "run the host: every enabled channel, cron and the HTTP port"),
    "preview": ("bot.cli.preview", "print the exact model request for an event file"),
    "history": ("bot.cli.history", "show or reset one conversation's stored history"),
    "memory": ("bot.cli.memory", "search or forget long-term memory entries"),
    "turns": (
        "bot.cli.turn_records",
        "show turn records (the exact requests sent, usage, outcome)",
    ),
    "usage": (
        "bot.cli.usage",
        "report tokens, cache share and money by person, surface, day, agent or model",
    ),
    "cron": ("bot.cli.cron", "list scheduled jobs or run one now"),
    "store": ("bot.cli.store", "copy the SQLite store into PostgreSQL (migrate --to URL)"),
    "tools": (
        "bot.cli.tools",
        "list the tools each surface is offered (MCP servers' and built-in)",
    ),
    "approvals": ("bot.cli.approvals", "list tool calls waiting for (or decided by) an approver"),
    "access": (
        "bot.cli.access",
        "admit a person by their pairing code, list who is admitted, or revoke an admission",
    ),
    "console": (
        "bot.cli.console",
        "hash an operator's password for the browser console ([console] operators)",
    ),
    "init": ("bot.cli.init", "write a starter config folder"),
    "doctor": ("bot.cli.doctor", "check config, files, tokens and services"),
}
# Commands that must work without a valid config (they create or diagnose one).
NO_CONFIG = {"init", "doctor", "console"}


class _CommandModule(Protocol):
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, config: object) -> int: ...


_CONFIG_HELP = "path to bot.toml (default: config/bot.toml); accepted before or after any command"


def _parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bot", description="Host an AI agent on Slack, Telegram, cron and the terminal."
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            _module(module_name).add_arguments(sub)
    _add_config_everywhere(parser)
    return parser


def _add_config_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--config` in every parser's --help, at every depth. `main` takes it out of the command
    line before parsing, wherever it stands, so these entries only document it."""
    parser.add_argument("--config", type=Path, metavar="PATH", help=_CONFIG_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _add_config_everywhere(sub)


def _take_config(argv: list[str]) -> tuple[Path | None, list[str]]:
    """The `--config PATH` (or `--config=PATH`) anywhere in `argv`, and the rest; the last wins.
    Nothing after a bare `--` is looked at."""
    found: Path | None = None
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--":
            rest += [arg, *args]
            break
        if arg == "--config":
            value = next(args, None)
            if value is None:
                rest.append(arg)  # argparse says the value is missing
                continue
            found = Path(value)
        elif arg.startswith("--config="):
            found = Path(arg.removeprefix("--config="))
        else:
            rest.append(arg)
    return found, rest


class _Version(argparse.Action):
    """argparse's version action, reading the installed version only when asked: looking it up
    costs a tenth of a `--help`."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"bot {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bot-host")
    except PackageNotFoundError:
        return "unknown"


def _module(name: str) -> _CommandModule:
    return cast(_CommandModule, importlib.import_module(name))


def _chosen(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config_path, argv = _take_config(argv)
    args = _parser(_chosen(argv)).parse_args(argv)
    args.config = config_path
    if args.command is None:
        _parser(None).print_help()
        return 0
    module = _module(COMMANDS[args.command][0])
    from bot.cli.settings import load_config
    from bot.errors import ConfigError
    from bot.logs import configure_logging

    try:
        if args.command in NO_CONFIG:
            return module.run(args, None)
        config = load_config(args.config)
        for warning in config.warnings:
            print(f"bot: warning: {warning}", file=sys.stderr)
        configure_logging(config.settings.logging, secrets=config.secrets)
        status = module.run(args, config)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return status
    except ConfigError as exc:
        print(f"bot: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Whoever read the output went away (`bot history show --list | head`): stop quietly, as
        # a program SIGPIPE ends would. Stdout now points nowhere so the exit flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
