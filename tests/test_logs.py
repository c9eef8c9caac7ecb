"""Logging: JSON lines off a terminal, and no secret survives into a line."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from collections.abc import Iterator

import structlog
from hypothesis import given
from hypothesis import strategies as st

from bot import logs
from bot.config import LoggingSettings, Secrets
from bot.logs import (
    REDACTED,
    SECRET_PATTERNS,
    configure_logging,
    redact_json,
    redact_shapes,
    redact_text,
    remember_secrets,
)

SLACK_BOT = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUv"
SLACK_APP = "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef"
TELEGRAM = "7123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0"
ANTHROPIC = "sk-ant-api03-AbCdEf0123456789_ghIJklMNopQRstu-vwXYZ"
CUSTOM = "webhook-shared-secret-42"


def _configure(stream: io.StringIO) -> None:
    secrets = Secrets({"ANTHROPIC_API_KEY": ANTHROPIC, "DEPLOY_TOKEN": CUSTOM})
    configure_logging(LoggingSettings(level="debug", format="json"), secrets, stream)


def test_structlog_lines_are_json_and_redacted() -> None:
    stream = io.StringIO()
    _configure(stream)
    log = structlog.get_logger("test")
    with structlog.contextvars.bound_contextvars(turn_id="t1", conversation_key="slack:T:C:1"):
        log.info(
            "delivery_failed",
            error=f"bad token {SLACK_BOT} / {SLACK_APP}",
            nested={"items": [TELEGRAM, ANTHROPIC, CUSTOM]},
        )
    line = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert line["event"] == "delivery_failed"
    assert line["turn_id"] == "t1"
    assert line["conversation_key"] == "slack:T:C:1"
    text = stream.getvalue()
    for secret in (SLACK_BOT, SLACK_APP, TELEGRAM, ANTHROPIC, CUSTOM):
        assert secret not in text
    assert REDACTED in text


def test_standard_library_logs_from_sdks_are_redacted_too() -> None:
    stream = io.StringIO()
    _configure(stream)
    logging.getLogger("telegram.ext").warning(
        "POST https://api.telegram.org/bot%s/getUpdates failed", TELEGRAM
    )
    try:
        raise RuntimeError(f"auth failed for {SLACK_BOT}")
    except RuntimeError:
        logging.getLogger("slack_bolt").exception("listener error")
    text = stream.getvalue()
    assert "getUpdates failed" in text
    assert TELEGRAM not in text
    assert SLACK_BOT not in text


_TOKENS = st.sampled_from([SLACK_BOT, SLACK_APP, TELEGRAM, ANTHROPIC])


@given(st.text(max_size=40), _TOKENS, st.text(max_size=40))
def test_any_text_around_a_token_loses_the_token(before: str, token: str, after: str) -> None:
    assert token not in redact_text(f"{before} {token} {after}")


def test_third_party_lines_and_uncaught_errors_are_json_and_redacted_by_value() -> None:
    stream = io.StringIO()
    _configure(stream)
    logging.getLogger("httpx").warning("HTTP Request: POST /hooks/deploy?t=%s", CUSTOM)
    try:
        raise ValueError(f"could not verify {CUSTOM}")
    except ValueError:
        logging.getLogger("slack_bolt.App").exception("Failed to run a middleware")
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
    lines = stream.getvalue().strip().splitlines()
    events = [json.loads(line) for line in lines]  # every line is one JSON document
    assert len(events) == 3
    assert events[0]["logger"] == "httpx"
    assert "Traceback" in events[1]["exception"]
    assert events[2]["event"] == "uncaught_exception"
    assert CUSTOM not in stream.getvalue()
    assert "could not verify [redacted]" in stream.getvalue()


# A configured secret of any shape, JSON-escaped characters included, and the known token shapes.
_SECRETS = st.text(min_size=6, max_size=24).filter(lambda s: s.strip() == s and len(set(s)) > 3)
_JSON = st.recursive(
    st.none() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@contextlib.contextmanager
def remembered(secret: str) -> Iterator[None]:
    """`secret` redacted for the block only (remembered secrets are process-wide)."""
    kept = logs._known
    remember_secrets([secret])
    try:
        yield
    finally:
        logs._known = kept


@given(_JSON, _SECRETS, _TOKENS, st.text(max_size=20), st.text(max_size=20))
def test_json_text_is_redacted_like_each_string_in_it(
    value: object, secret: str, token: str, before: str, after: str
) -> None:
    document = {"body": value, "said": f"{before}{secret}{after}", "echo": [f"{before} {token}"]}

    with remembered(secret):
        text = redact_json(document)
    back = json.loads(text)

    assert secret not in json.dumps(back, ensure_ascii=False)
    assert token not in text
    plain = json.dumps(value, ensure_ascii=False)
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    if secret not in plain and escaped not in plain and not SECRET_PATTERNS.search(plain):
        assert back["body"] == value  # nothing to redact: unchanged


_SHAPE_PIECES = st.sampled_from(
    ["xoxb-", "xoxp-", "xapp-", "sk-ant-", ":", "-", "_", " ", "/bot", "1234567", "89", "٣", "A"]
)
_SHAPED = st.lists(
    st.one_of(_SHAPE_PIECES, st.text(alphabet="0123456789abcXYZ:-_ ", max_size=40)), max_size=30
).map("".join)


@given(_SHAPED)
def test_no_credential_shape_survives_the_fast_redaction(text: str) -> None:
    redacted = redact_shapes(text)

    assert not SECRET_PATTERNS.search(redacted)
    if not SECRET_PATTERNS.search(text):
        assert redacted == text
