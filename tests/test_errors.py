"""The one error tree: every exception the program defines is a BotError, and lives in bot.errors
(or, private to one module, names its branch)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import bot
import channels
from bot import errors
from bot.errors import BotError


def _modules() -> list[str]:
    names = []
    for package in (bot, channels):
        prefix = package.__name__ + "."
        names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]
    return [name for name in names if not name.endswith("__main__")]  # runs the program


@pytest.mark.parametrize("name", _modules())
def test_every_exception_class_is_a_bot_error(name: str) -> None:
    module = importlib.import_module(name)
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != name or not issubclass(cls, BaseException):
            continue
        assert issubclass(cls, BotError), f"{name}.{cls.__name__} is outside the error tree"
        assert name == "bot.errors" or cls.__name__.startswith("_"), (
            f"{name}.{cls.__name__}: a public error belongs in bot.errors"
        )


def test_the_docstring_draws_every_class_of_the_tree() -> None:
    drawn = errors.__doc__ or ""
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if cls.__module__ == "bot.errors":
            assert re.search(rf"^(\W*\s)?{name}\s", drawn, re.M), f"{name} is not drawn"
