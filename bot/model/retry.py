"""Which model-call failures are worth another try, and how long to wait before it.

The SDKs' own retries are off (`max_retries=0`): the runtime owns the policy so it can count
attempts, honour a retry budget and put every wait through an injectable sleep. Each wire turns
its SDK's errors into a `WireError` first, so the policy is the same on every wire.

- retried: 408, 409, 429, 5xx and 529 (overloaded), the same error types arriving mid-stream,
  connection errors and timeouts;
- `OVERFLOW`: a 400 saying the prompt is too long (or coded `context_length_exceeded`):
  compaction may cure it;
- `REFUSED`: any other 400, or a 413 (the request's bytes): something the request carried was
  refused; leaving out the content the API named (or every image and document) may cure it;
- `AUTH`: 401, the key is wrong; `DENIED`: 403; everything else is `FATAL`. None of these is
  retried as is.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from enum import Enum

# WireError lives in the error tree; the wires and the runtime import it from here.
from bot.errors import WireError as WireError

BASE_DELAY = 0.5
MAX_DELAY = 30.0
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
_RETRY_ERROR_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
_OVERFLOW_MARKERS = ("prompt is too long", "context window", "context length", "too many tokens")
_OVERFLOW_CODES = {"context_length_exceeded"}


_BLOCK_PATH = re.compile(r"^messages\.(\d+)\.content\.(\d+)\b")


class Verdict(Enum):
    RETRY = "retry"
    OVERFLOW = "overflow"
    REFUSED = "refused"
    AUTH = "auth"
    DENIED = "denied"
    FATAL = "fatal"


def classify(exc: BaseException) -> Verdict:
    if isinstance(exc, TimeoutError):
        return Verdict.RETRY
    if not isinstance(exc, WireError):
        return Verdict.FATAL
    status = exc.status
    if status is None or status in _RETRY_STATUS or status >= 500:
        return Verdict.RETRY  # no answer at all: a connection error or a timeout
    if status == 400 and _is_overflow(exc):
        return Verdict.OVERFLOW
    if status in {400, 413}:
        return Verdict.REFUSED
    if status == 401:
        return Verdict.AUTH
    if status == 403:
        return Verdict.DENIED
    if status < 400 and exc.kind in _RETRY_ERROR_TYPES:
        return Verdict.RETRY  # an error event in the middle of a 200 stream
    return Verdict.FATAL


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (isinstance(exc, WireError) and exc.timed_out)


def error_message(exc: BaseException) -> str:
    """A short description of a failure for logs and TurnFailed (no request content)."""
    if isinstance(exc, WireError):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "the call timed out"
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def refused_block(exc: BaseException) -> tuple[int, int] | None:
    """(message, block) of the request block a refusal names (`messages.3.content.1...`)."""
    if not isinstance(exc, WireError):
        return None
    found = _BLOCK_PATH.match(exc.detail)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _is_overflow(exc: WireError) -> bool:
    return exc.kind in _OVERFLOW_CODES or any(m in exc.detail.lower() for m in _OVERFLOW_MARKERS)


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """The server's requested wait in seconds (`retry-after-ms` or `retry-after`), if any."""
    if not isinstance(exc, WireError):
        return None
    headers = exc.headers
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def backoff(attempt: int, rng: random.Random) -> float:
    """Exponential backoff with jitter: attempt 1 waits 0.25-0.5 s, doubling up to 30 s."""
    ceiling = min(BASE_DELAY * 2.0 ** (attempt - 1), MAX_DELAY)
    return ceiling * rng.uniform(0.5, 1.0)


def delay_for(exc: BaseException, attempt: int, rng: random.Random) -> float:
    """Honour the server's retry-after when it gives one, else back off."""
    requested = retry_after(exc)
    return requested if requested is not None else backoff(attempt, rng)
