"""What can go wrong calling the Slack Web API, and how to name it without leaking anything."""

from __future__ import annotations

from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.errors import ChannelUnavailable, ConfigError

# Every failure a Web API call can raise: Slack's own answers (SlackApiError, a SlackClientError)
# and the transport's.
CALL_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError, OSError)


def slack_error(exc: BaseException) -> str | None:
    """Slack's own error code (`invalid_auth`, `missing_scope`...) when the answer was Slack's
    JSON; None for anything else (a proxy's page, a body that is not JSON, no answer)."""
    if not isinstance(exc, SlackApiError):
        return None
    data = getattr(exc.response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    return str(error) if error else None


def error_code(exc: BaseException) -> str:
    """Slack's error code (`missing_scope`, `ratelimited`...), else the HTTP status or the
    exception's type. Never the request, which carries the token."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        status = getattr(response, "status_code", None) or getattr(response, "status", "?")
        return slack_error(exc) or f"http {status}"
    return type(exc).__name__


async def auth_test(client: AsyncWebClient, api_url: str) -> AsyncSlackResponse:
    """`auth.test`, for start-up and `bot doctor`: a ConfigError when Slack refuses the token,
    a ChannelUnavailable when no Slack answers there (unreachable, or garbage such as a proxy's
    page or a body that is not JSON, on which the SDK itself may raise anything)."""
    try:
        return await client.auth_test()
    except Exception as exc:
        if slack_error(exc) is not None:
            raise ConfigError(
                f"Slack refused SLACK_BOT_TOKEN ({error_code(exc)}) at {api_url}. Fix: set "
                "SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-…) of the installed app, "
                "and check slack.api_url."
            ) from None
        raise unavailable(exc, api_url) from None


def unavailable(exc: BaseException, api_url: str) -> ChannelUnavailable:
    """One line for a Slack that cannot be used now: unreachable, or not answering as Slack."""
    if isinstance(exc, CALL_ERRORS) and not isinstance(exc, SlackApiError):
        return ChannelUnavailable(
            f"cannot reach Slack at slack.api_url = {api_url!r} ({type(exc).__name__}). "
            "Fix: check the network or slack.api_url."
        )
    what = error_code(exc) if isinstance(exc, SlackApiError) else "a body that is not its JSON"
    return ChannelUnavailable(
        f"Slack at slack.api_url = {api_url!r} answered {what}, not Slack's API. Fix: check "
        "slack.api_url (https://slack.com/api/ by default) and any proxy on the way."
    )


def retry_after(response: Any) -> float:
    """The seconds a 429 response asks us to wait (its `Retry-After` header; 1 when missing or
    unreadable, never negative)."""
    headers = {str(k).lower(): v for k, v in (getattr(response, "headers", None) or {}).items()}
    value = headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0
