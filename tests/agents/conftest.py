"""Fixtures for the several-agents tests."""

from __future__ import annotations

import pytest

from bot.prompt import TokenCounter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()
