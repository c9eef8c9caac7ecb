"""Logging setup: structlog configured once, JSON lines off a terminal, colours on one, secrets out.

Every event carries the turn id and conversation key when one is bound (the host binds them with
`structlog.contextvars`). A redaction processor replaces the configured secret values and anything
shaped like a Slack, Telegram or Anthropic credential before a line is rendered.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterable, MutableMapping
from types import TracebackType
from typing import Any, TextIO

import structlog

from bot.config import LoggingSettings, Secrets
from bot.tracing import add_trace_ids

REDACTED = "[redacted]"

# Credential shapes, so a token that never went through Secrets (pasted into a message, echoed in
# an SDK error) is still caught.
SECRET_PATTERNS = re.compile(
    r"xox[abpers]-[A-Za-z0-9-]{8,}"  # Slack bot/user/legacy tokens
    r"|xapp-[A-Za-z0-9-]{8,}"  # Slack app-level tokens
    r"|sk-ant-[A-Za-z0-9_-]{8,}"  # Anthropic keys
    r"|(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}"  # Telegram bot tokens (also inside /bot<token>/)
)
# The same shapes, found fast in long texts (a turn record holds a whole request): each prefixed
# shape only where its prefix occurs, and a Telegram token from its ':' and tail (a regex that
# starts with a literal is scanned for quickly; one that starts with digits is tried everywhere).
_PREFIXED = (
    ("xox", re.compile(r"xox[abpers]-[A-Za-z0-9-]{8,}")),
    ("xapp-", re.compile(r"xapp-[A-Za-z0-9-]{8,}")),
    ("sk-ant-", re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}")),
)
_TELEGRAM_TAIL = re.compile(r":[A-Za-z0-9_-]{30,}")
_TELEGRAM_DIGITS = (6, 12)


# Every configured secret value this process has seen (longest first, so a secret that contains
# another is replaced whole): logs, turn records and tracebacks redact them by value, whatever
# their shape (a webhook token or signing secret looks like any other string).
_known: tuple[str, ...] = ()


def remember_secrets(values: Iterable[str]) -> None:
    """Redact these values everywhere in this process from now on."""
    global _known
    found = {*_known, *(value for value in values if value and len(value) >= 6)}
    _known = tuple(sorted(found, key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    for value in (*secrets, *_known):
        if value and len(value) >= 6:
            text = text.replace(value, REDACTED)
    return redact_shapes(text)


def redact_shapes(text: str) -> str:
    """Replace everything `SECRET_PATTERNS` matches, without trying its digits-first Telegram
    shape at every position of a long text."""
    for prefix, shape in _PREFIXED:
        if prefix in text:
            text = shape.sub(REDACTED, text)
    if ":" not in text:
        return text
    pieces: list[str] = []
    done = 0
    for tail in _TELEGRAM_TAIL.finditer(text):
        start = tail.start()
        first = start
        while first > done and text[first - 1].isdecimal():
            first -= 1
        low, high = _TELEGRAM_DIGITS
        # The digits must be a whole run (none before them), as the pattern's (?<!\d) says.
        if low <= start - first <= high and not (first > 0 and text[first - 1].isdecimal()):
            pieces += [text[done:first], REDACTED]
            done = tail.end()
    return "".join(pieces) + text[done:] if pieces else text


def redact_json(value: Any) -> str:
    """`value` as JSON text (non-ASCII kept, anything else as its str) with every secret
    redacted: one pass over the text rather than one per string inside it. A secret is looked
    for both as it is and as JSON escapes it, and no credential shape can span JSON's own
    punctuation, so this catches what redacting each string would."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    escaped = tuple(json.dumps(secret, ensure_ascii=False)[1:-1] for secret in _known)
    return redact_text(text, escaped)


def redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    """Redact strings anywhere inside nested dicts, lists and tuples."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {key: redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item, secrets) for item in value)
    return value


class Redactor:
    """structlog processor: no secret value survives into a rendered line."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)

    def __call__(
        self, logger: Any, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            event[key] = redact_value(value, self.secrets)
        return event


def configure_logging(
    settings: LoggingSettings, secrets: Secrets | None = None, stream: TextIO | None = None
) -> None:
    stream = stream or sys.stderr
    level = getattr(logging, settings.level.upper())
    as_json = settings.format == "json" or (settings.format == "auto" and not stream.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            Redactor(secrets.values.values() if secrets else ()),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    remember_secrets(secrets.values.values() if secrets else ())
    _route_stdlib_logging(max(level, logging.WARNING))


def _route_stdlib_logging(level: int) -> None:
    """The SDKs (bolt, PTB, httpx, asyncio) log through the standard library: send their records
    through the same structlog pipeline (JSON lines, redaction), never as raw text beside it;
    uncaught exceptions and warnings too."""
    root = logging.getLogger()
    root.handlers = [_ToStructlog()]
    root.setLevel(level)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


class _ToStructlog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            structlog.get_logger(record.name).log(
                record.levelno,
                record.getMessage(),
                logger=record.name,
                exc_info=record.exc_info if record.exc_info and record.exc_info[0] else None,
            )
        except Exception:
            self.handleError(record)


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    structlog.get_logger("bot").critical("uncaught_exception", exc_info=(kind, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is not None:
        _log_uncaught(args.exc_type, args.exc_value, args.exc_traceback)
