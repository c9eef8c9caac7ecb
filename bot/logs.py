"""Logging setup: structlog configured once, JSON lines off a terminal, colours on one, secrets out.

Every event carries the turn id and conversation key when one is bound (the host binds them with
`structlog.contextvars`). A redaction processor replaces the configured secret values and anything
shaped like a Slack, Telegram or Anthropic credential before a line is rendered.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

from bot.config import LoggingSettings, Secrets

REDACTED = "[redacted]"

# Credential shapes, so a token that never went through Secrets (pasted into a message, echoed in
# an SDK error) is still caught.
SECRET_PATTERNS = re.compile(
    r"xox[abpers]-[A-Za-z0-9-]{8,}"  # Slack bot/user/legacy tokens
    r"|xapp-[A-Za-z0-9-]{8,}"  # Slack app-level tokens
    r"|sk-ant-[A-Za-z0-9_-]{8,}"  # Anthropic keys
    r"|(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}"  # Telegram bot tokens (also inside /bot<token>/)
)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    for value in secrets:
        if value and len(value) >= 6:
            text = text.replace(value, REDACTED)
    return SECRET_PATTERNS.sub(REDACTED, text)


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
    # The SDKs log through the standard library (PTB puts the bot token in URLs): keep them
    # quiet, on the same stream, and through the same redaction.
    logging.basicConfig(level=max(level, logging.WARNING), stream=stream, force=True)
    redacting = _RedactingFilter(secrets.values.values() if secrets else ())
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)


class _RedactingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage(), self.secrets)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
