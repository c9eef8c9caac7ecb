"""HTTP intake hygiene: outside input the host cannot read gets a 400 and one log line, never a 500.

Every POST to the host's HTTP port (`/slack/events`, the Telegram webhook, `/hooks/<name>`) goes
through `guard` before its handler:

- a header value that is not printable ASCII is refused;
- the body must be UTF-8; a JSON body (or the JSON `payload` field of a form body, as Slack sends
  interactions) must parse, nest at most `MAX_DEPTH` levels and hold no integer longer than
  `MAX_INT_DIGITS` digits (a 5,000-digit number costs quadratic time to convert, and Python
  refuses it with a ValueError);
- anything a handler still fails on while reading such input (an exception, or a 500 an SDK
  answered by itself) is answered 400, not 500.

Each refusal logs one `http_input_refused` line with the path and the reason, never the body.
Authentication stays the handlers' job (401); this runs before it, so malformed input is refused
the same way whether or not it was signed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import structlog
from aiohttp import web

from bot.errors import BadInput

log = structlog.get_logger(__name__)

MAX_DEPTH = 64
MAX_INT_DIGITS = 40
_JSON = "application/json"
_FORM = "application/x-www-form-urlencoded"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method != "POST":
        return await handler(request)
    try:
        _check_headers(request)
        await _check_body(request)
        response = await handler(request)
    except (web.HTTPException, asyncio.CancelledError):
        raise
    except BadInput as exc:
        return _refuse(request, str(exc))
    except Exception as exc:
        return _refuse(request, f"the request could not be read ({type(exc).__name__})")
    if response.status == 500:  # an SDK's handler failed on it (bolt answers 500 itself)
        return _refuse(request, "the request could not be read")
    return response


def _refuse(request: web.Request, reason: str) -> web.Response:
    log.warning("http_input_refused", path=request.path, reason=reason)
    return web.json_response({"ok": False, "error": reason}, status=400)


def _check_headers(request: web.Request) -> None:
    # Slack, Telegram and webhook callers send ASCII header values; anything else (including
    # bytes that are not UTF-8, which aiohttp keeps as surrogates) is refused before a handler
    # or an SDK tries to read it.
    for name, value in request.headers.items():
        if not (value.isascii() and value.isprintable()):
            raise BadInput(f"header {name} holds characters other than printable ASCII")


async def _check_body(request: web.Request) -> None:
    body = await request.read()  # bounded by the application's client_max_size (413 past it)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("the body is not UTF-8 text") from None
    if request.content_type == _JSON:
        parse_json(text)
    elif request.content_type == _FORM:
        for payload in parse_qs(text).get("payload", []):
            parse_json(payload)


def parse_json(text: str | bytes) -> Any:
    """`json.loads`, refusing (BadInput) what is not JSON, nests too deep or holds huge numbers."""
    try:
        value = json.loads(text, parse_int=_int, parse_constant=_constant)
    except BadInput:
        raise
    except (ValueError, RecursionError):
        raise BadInput("the body is not valid JSON") from None
    if _depth(value) > MAX_DEPTH:
        raise BadInput(f"the JSON nests deeper than {MAX_DEPTH} levels")
    return value


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise BadInput(f"the JSON holds a number longer than {MAX_INT_DIGITS} digits")
    return int(digits)


def _constant(name: str) -> Any:
    raise BadInput(f"the JSON holds {name}, which JSON does not allow")


def _depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
