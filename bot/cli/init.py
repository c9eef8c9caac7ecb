"""`bot init [DIR]`: write a starter config folder that works as it is."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

HELP = "write a starter config folder"

# Starter file (in the bot.starter package) -> where it goes in the new folder.
FILES = {
    "bot.toml": "bot.toml",
    "IDENTITY.md": "IDENTITY.md",
    "skills/summarize/SKILL.md": "skills/summarize/SKILL.md",
    "env.example": ".env.example",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", type=Path, default=Path("config"), help="default: config")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def run(args: argparse.Namespace, config: object) -> int:
    target: Path = args.dir
    starter = resources.files("bot.starter")
    existing = [name for name in FILES.values() if (target / name).exists()]
    if existing and not args.force:
        print(
            f"bot init: {target} already has {', '.join(existing)}; nothing was written. "
            "Fix: choose another folder, or pass --force to overwrite them.",
            file=sys.stderr,
        )
        return 1
    try:
        for source, name in FILES.items():
            _copy(starter.joinpath(source), target / name)
    except OSError as exc:
        print(
            f"bot init: cannot write the starter config to {target}: "
            f"{exc.strerror or exc} ({exc.filename or target}). "
            "Fix: name a folder you may write to that is not a file.",
            file=sys.stderr,
        )
        return 1
    print(f"Wrote a starter config to {target}/:")
    for name in FILES.values():
        print(f"  {target / name}")
    print(
        "\nNext: copy .env.example to .env and set ANTHROPIC_API_KEY, then\n"
        f"  bot doctor --config {target / 'bot.toml'}\n"
        f"  bot chat --config {target / 'bot.toml'}"
    )
    return 0


def _copy(source: Traversable, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
