"""What can go wrong calling the Slack Web API, and how to name it without leaking anything."""

from __future__ import annotations

from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

# Every failure a Web API call can raise: Slack's own answers (SlackApiError, a SlackClientError)
# and the transport's.
CALL_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError, OSError)


def error_code(exc: BaseException) -> str:
    """Slack's error code (`missing_scope`, `ratelimited`...), else the HTTP status or the
    exception's type. Never the request, which carries the token."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        error = response.get("error") if response is not None else None
        return str(error or f"http {getattr(response, 'status_code', '?')}")
    return type(exc).__name__


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
