"""Pairing on Slack (`[access] unknown = "pair"`, SPEC §19): someone on no allowlist who writes
to the bot in a DM gets a one-time code there; once an operator admitted them (`bot access
approve`), their messages start turns like a listed person's.

Only messages take part: slash commands, the stop button and approval buttons keep checking the
allowlists alone.
"""

from __future__ import annotations

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import replies
from bot.ports.access import Pairing

log = structlog.get_logger(__name__)


class Pairs:
    """The admitted people, and the codes offered in DMs."""

    def __init__(self, pairing: Pairing, client: AsyncWebClient) -> None:
        self._pairing = pairing
        self._client = client

    async def admitted(self, person: str) -> bool:
        return await self._pairing.admitted(person)

    async def offer(self, person: str, channel: str, label: str) -> None:
        """Send an unknown person a code in their DM (a few an hour at most: beyond, nothing).
        The code is in that message only: never logged."""
        code = await self._pairing.ask(person, label)
        log.info("slack_pairing_offered", offered=code is not None)
        if code is None:
            return
        try:
            await self._client.chat_postMessage(channel=channel, text=replies.pairing_code(code))
        except SlackApiError as exc:
            log.warning("slack_pairing_not_sent", error=str(exc.response.get("error")))
