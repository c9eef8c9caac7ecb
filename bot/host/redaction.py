"""A turn request without the secrets the host knows: what a person pastes into a chat (a token,
a key, a value the host gives an MCP server) is redacted by value, with the logs' redactor, in
their text and the messages before it (and the text a channel keeps to name mentions later),
before the request is stored or read by anything."""

from __future__ import annotations

from dataclasses import replace

from bot.logs import redact_text
from bot.turns import TurnRequest


def without_secrets(request: TurnRequest) -> TurnRequest:
    """`request` itself when it holds no secret, else a copy with each one `[redacted]`."""
    text = redact_text(request.text)
    preceding = tuple(replace(m, text=redact_text(m.text)) for m in request.preceding)
    lookups = request.lookups
    if lookups is not None:  # the text as written, kept to name its mentions later
        lookups = replace(lookups, text=redact_text(lookups.text))
    if (text, preceding, lookups) == (request.text, request.preceding, request.lookups):
        return request
    return replace(request, text=text, preceding=preceding, lookups=lookups)
