"""Fixtures for the prompt tests (builders live in tests/prompt/builders.py)."""

from __future__ import annotations

import pytest

from bot.prompt import TokenCounter


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """One counter for the session: loading the encoding takes ~0.1 s."""
    return TokenCounter()
