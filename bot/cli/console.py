"""`bot console passwd NAME`: hash an operator's password for `[console] operators` (argon2id).

The password is read from the terminal (asked twice), or as one line from standard input when
that is not a terminal; it is never an argument (arguments show in `ps` and shell history)."""

from __future__ import annotations

import argparse
import getpass
import re
import sys

HELP = "hash an operator's password for the browser console ([console] operators)"
MIN_LENGTH = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    passwd = actions.add_parser("passwd", help="hash a password and print the config lines")
    passwd.add_argument("name", metavar="NAME", help="the operator's name, e.g. ada")


def run(args: argparse.Namespace, config: object) -> int:
    from bot.console.passwords import hash_password
    from bot.console.settings import OPERATOR_NAME

    if not re.fullmatch(OPERATOR_NAME, args.name):
        print(
            f"bot console passwd: {args.name!r} is not an operator name. Fix: use 1-32 lowercase "
            "letters, digits, '.', '_' or '-', starting with a letter (e.g. ada).",
            file=sys.stderr,
        )
        return 2
    password = _read_password()
    if password is None:
        return 2
    print(
        "# Add to bot.toml (the hash is not a secret, but keep the password to yourself):\n"
        f'[[console.operators]]\nname = "{args.name}"\npassword_hash = "{hash_password(password)}"'
    )
    return 0


def _read_password() -> str | None:
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print(
                "bot console passwd: the two passwords differ. Fix: run it again.", file=sys.stderr
            )
            return None
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if len(password) < MIN_LENGTH:
        print(
            f"bot console passwd: the password is shorter than {MIN_LENGTH} characters. Fix: "
            "choose a longer one (a few words work well).",
            file=sys.stderr,
        )
        return None
    return password
