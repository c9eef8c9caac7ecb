"""The suite's own guard: a test may connect to loopback only."""

from __future__ import annotations


def test_the_suite_only_reaches_loopback() -> None:
    from tests.conftest import _loopback

    assert _loopback(("127.0.0.1", 80))
    assert _loopback(("::1", 80, 0, 0))
    assert _loopback(("localhost", 80))
    assert _loopback("/tmp/some.sock")
    assert not _loopback(("192.0.2.1", 443))
    assert not _loopback(("api.anthropic.com", 443))
