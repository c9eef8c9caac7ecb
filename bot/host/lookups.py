"""Completing a stored request at turn time with what its channel left to look up (Slack names)."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from bot.ports.intake import RequestCompleter
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)


async def completed(
    completers: Mapping[str, RequestCompleter], request: TurnRequest
) -> TurnRequest:
    """The request with the names its channel left for the turn to look up (Slack's)."""
    lookups = request.lookups
    completer = completers.get(request.channel) if lookups is not None else None
    if lookups is None or completer is None:
        return request
    try:
        return request.named(await completer.look_up(lookups))
    except Exception:  # the stored request is readable as it is
        log.exception("request_completion_failed")
        return request
