"""Fixtures for the console tests: the `bot` command (tests/cli)."""

from tests.cli.conftest import bot  # noqa: F401
