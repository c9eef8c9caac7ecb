"""`bot console passwd NAME`: the printed lines are a working `[[console.operators]]` entry whose
hash checks the password given on stdin; a short password or a bad name is refused with the fix."""

from __future__ import annotations

import tomllib

from bot.console.passwords import password_matches
from bot.console.settings import ConsoleSettings
from tests.cli.conftest import RunBot

PASSWORD = "a long enough passphrase"


def test_the_printed_entry_loads_and_checks_the_password(bot: RunBot) -> None:
    done = bot("console", "passwd", "ada", stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    settings = ConsoleSettings(enabled=True, **tomllib.loads(done.stdout)["console"])
    [operator] = settings.operators
    assert operator.name == "ada"
    assert operator.password_hash is not None
    assert password_matches(operator.password_hash, PASSWORD)
    assert not password_matches(operator.password_hash, PASSWORD + "!")
    assert PASSWORD not in done.stdout + done.stderr


def test_a_short_password_and_a_bad_name_are_refused_with_the_fix(bot: RunBot) -> None:
    short = bot("console", "passwd", "ada", stdin="short\n")
    assert short.returncode == 2
    assert "Fix:" in short.stderr
    assert short.stdout == ""
    named = bot("console", "passwd", "Not A Name", stdin=PASSWORD + "\n")
    assert named.returncode == 2
    assert "is not an operator name. Fix:" in named.stderr


def test_a_malformed_hash_never_matches() -> None:
    assert not password_matches("$argon2id$v=19$garbage", "anything")
