"""Outside input on the HTTP port: generated hostile requests get 400/401, never a 500.

One App serves all three intake routes at once (Slack's Events API, the Telegram webhook and a
`/hooks/<name>` webhook) against the fake Slack, Telegram and Anthropic servers. Requests are
written as raw bytes on a socket so header values can be any bytes at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bot.cli.compose import App
from bot.cli.settings import load_config
from bot.errors import BadInput
from bot.httpguard import MAX_DEPTH, parse_json
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

SIGNING_SECRET = "slack-signing-secret-for-tests"
TG_SECRET = "telegram-webhook-secret"
HOOK_TOKEN = "hook-token-0123456789abcdef"
PATHS = ["/slack/events", "/telegram/webhook", "/hooks/deploy"]


# --- the parser on its own ----------------------------------------------------------------------


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_parse_json_refuses_clearly_or_parses(raw: bytes) -> None:
    refusal = ""
    try:
        parse_json(raw)
    except BadInput as exc:  # the only exception it may raise, with a reason a person can read
        refusal = str(exc)
    assert refusal == "" or refusal.startswith("the ")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nests deeper"),
        ('{"update_id": ' + "9" * 5000 + "}", "number longer"),
        ('{"a": NaN}', "NaN"),
        (b"\xff\xfe{}", "not valid JSON"),
    ],
)
def test_parse_json_names_the_problem(raw: str | bytes, reason: str) -> None:
    with pytest.raises(BadInput, match=reason):
        parse_json(raw)


# --- the whole host -----------------------------------------------------------------------------


@pytest.fixture
async def host(agent_dir: Path) -> AsyncIterator[App]:
    async with FakeAnthropic() as claude, FakeSlack() as slack, FakeTelegram() as tg:
        write_config(
            agent_dir,
            f"""
            [model]
            max_retries = 0

            [slack]
            enabled = true
            mode = "http"
            api_url = "{slack.api_url}"

            [telegram]
            enabled = true
            mode = "webhook"
            api_url = "{tg.base_url}"

            [[webhooks]]
            name = "deploy"
            token_env = "HOOK_TOKEN"
            prompt_template = "Summarize: {{{{body}}}}"
            """,
        )
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "TELEGRAM_BOT_TOKEN": tg.token,
            "TELEGRAM_WEBHOOK_SECRET": TG_SECRET,
            "HOOK_TOKEN": HOOK_TOKEN,
            "BOT_HTTP__ENABLED": "true",
            "BOT_HTTP__PORT": "0",
        }
        async with App(load_config(agent_dir / "bot.toml", env=env)) as app:
            yield app


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


_BODIES = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=40).map(lambda b: b"\xff\xfe" + b + b"\xc3"),  # never UTF-8
    st.integers(MAX_DEPTH + 1, 20_000).map(_deep),
    st.integers(41, 6_000).map(lambda n: b'{"update_id": ' + b"7" * n + b"}"),
    st.integers(41, 6_000).map(lambda n: b'{"type": "event_callback", "x": -' + b"1" * n + b"}"),
    st.text(max_size=80).map(str.encode),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode()),
)
_CONTENT_TYPES = st.sampled_from(
    [b"application/json", b"application/x-www-form-urlencoded", b"text/plain", b""]
)
_HEADER_VALUES = st.one_of(
    st.binary(min_size=1, max_size=30).filter(lambda b: b"\r" not in b and b"\n" not in b),
    st.sampled_from([b"\xff\xfe", b"caf\xc3\xa9", b"-1", b"9" * 400, b"v0=zz"]),
)


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, bytes]:
    path = draw(st.sampled_from(PATHS))
    body = draw(_BODIES)
    if draw(st.booleans()) and path == "/slack/events":
        # Sign it: what a request that passed authentication would carry.
        stamp = str(int(time.time()))
        digest = hmac.new(SIGNING_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
        auth = [
            b"X-Slack-Request-Timestamp: " + stamp.encode(),
            b"X-Slack-Signature: v0=" + digest.hexdigest().encode(),
        ]
    elif path == "/slack/events":
        auth = [
            b"X-Slack-Request-Timestamp: " + draw(_HEADER_VALUES),
            b"X-Slack-Signature: " + draw(_HEADER_VALUES),
        ]
    elif path == "/telegram/webhook":
        secret = draw(st.sampled_from([TG_SECRET.encode(), b""]) | _HEADER_VALUES)
        auth = [b"X-Telegram-Bot-Api-Secret-Token: " + secret]
    else:
        # The right token too: malformed input is refused after authentication as well.
        token = draw(
            st.sampled_from([HOOK_TOKEN.encode(), HOOK_TOKEN.encode() + b"\xff", b""])
            | _HEADER_VALUES
        )
        auth = [b"Authorization: Bearer " + token]
    headers = [b"Content-Type: " + draw(_CONTENT_TYPES), *auth]
    if draw(st.booleans()):
        headers.append(b"X-Extra: " + draw(_HEADER_VALUES))
    return path, _raw_request(path, headers, body)


def _unreadable(raw: bytes) -> bool:
    """Not UTF-8, or declared JSON that is not (or nests too deep, or holds a huge number)."""
    head, body = raw.split(b"\r\n\r\n", 1)
    try:
        body.decode("utf-8")
        if b"Content-Type: application/json\r\n" in head + b"\r\n":
            parse_json(body)
    except (UnicodeDecodeError, BadInput):
        return True
    return False


def _raw_request(path: str, headers: list[bytes], body: bytes) -> bytes:
    head = [f"POST {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    head += [*headers, f"Content-Length: {len(body)}".encode()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def _send(port: int, raw: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    return int(status_line.split()[1])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=hostile())
async def test_hostile_requests_get_400_or_401_and_one_log_line(
    host: App, request: tuple[str, bytes]
) -> None:
    path, raw = request
    assert host.http_port is not None
    with capture_logs() as logs:
        status = await _send(host.http_port, raw)
    # Input the host cannot read is refused (400) or not authenticated (401); readable input may
    # get the platform's own answer (an empty update is fine; authorized webhook calls start runs,
    # and the hook's cap on runs in flight answers 429 once enough are running), never a 5xx.
    allowed = {400, 401} if _unreadable(raw) else {200, 202, 400, 401, 404, 429}
    assert status in allowed, (path, raw[:300])
    assert len([e for e in logs if e["log_level"] in {"warning", "error"}]) <= 1, logs
    healthy = _raw_request("/healthz", [], b"").replace(b"POST", b"GET", 1)
    assert await _send(host.http_port, healthy) in {200, 503}
