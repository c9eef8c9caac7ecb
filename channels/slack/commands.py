"""Slack's slash commands for the host's own commands (pure): `/memory`, `/forget N|all`, `/usage`
and `/schedules [remove ID]`, under the names `[slack] commands` gives them.

Slack's client takes a leading `/` in a message as a slash command, so in a DM these are the only
way to reach the host's commands. A command's payload (Socket Mode `slash_commands` envelope, or a
signed form POST in HTTP mode) becomes a `SlashCommand`, and that a `TurnRequest` the host answers
with `Host.command` (no model call, nothing in history). Its scope is the channel it was sent in:
in a DM everything the person said anywhere, elsewhere what they said in that channel.

The argument text is the person's: it is cut to one line of printable characters, at most
`MAX_ARGUMENT_CHARS`, before the host reads it.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.turns import ConversationKind, ReplyRoute, TurnRequest
from channels.slack.events import PLATFORM, Skip, person_id
from channels.slack.names import surface, surface_kind
from channels.slack.settings import SlashCommands

MAX_ARGUMENT_CHARS = 100  # "/forget 12" needs a few; nothing the host reads is longer
DM_NAME = "directmessage"  # the channel_name Slack sends for a command typed in a DM


@dataclass(frozen=True, slots=True)
class SlashCommand:
    """One slash command as the host needs it. Ids and the response URL stay route-side."""

    name: str  # the host's command: "memory", "forget", "usage" or "schedules"
    argument: str  # the cleaned text after the command
    team: str
    channel: str
    user: str
    dm: bool
    response_url: str | None
    # What names this one command however often it arrives (Socket Mode redelivers, a signed HTTP
    # request can be replayed byte for byte): its trigger_id, else a digest of the payload.
    request_id: str = ""


def read_command(body: Mapping[str, Any], names: SlashCommands) -> SlashCommand | Skip:
    """A slash command payload as the host command it stands for."""
    slash = _text(body.get("command"))
    if slash is None:
        return Skip("malformed: slash command without a command")
    name = names.host_command(slash)
    if name is None:
        return Skip(f"not a host command: {slash[:40]!r}")
    team = _text(body.get("team_id"))
    channel, user = _text(body.get("channel_id")), _text(body.get("user_id"))
    if team is None or channel is None or user is None:
        return Skip("malformed: slash command without team_id, channel_id or user_id")
    return SlashCommand(
        name=name,
        argument=clean_argument(body.get("text")),
        team=team,
        channel=channel,
        user=user,
        dm=body.get("channel_name") == DM_NAME or channel.startswith("D"),
        response_url=_text(body.get("response_url")),
        request_id=_request_id(body),
    )


def _request_id(body: Mapping[str, Any]) -> str:
    trigger = _text(body.get("trigger_id"))
    if trigger is not None:
        return f"trigger:{trigger[:200]}"
    fields = ("team_id", "channel_id", "user_id", "command", "text", "response_url")
    seen = json.dumps([str(body.get(name)) for name in fields], ensure_ascii=False)
    return f"payload:{hashlib.sha256(seen.encode('utf-8')).hexdigest()}"


def clean_argument(text: Any) -> str:
    """One line of printable characters (controls, format characters and line breaks become
    spaces, runs of spaces one), at most MAX_ARGUMENT_CHARS; "" for anything but a string."""
    if not isinstance(text, str):
        return ""
    spaced = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    return " ".join(spaced.split())[:MAX_ARGUMENT_CHARS].strip()


def command_request(command: SlashCommand, *, received_at: datetime, turn_id: str) -> TurnRequest:
    """The request `Host.command` answers: the host command's text, the person, the surface."""
    kind = surface_kind(None, "im" if command.dm else None, command.channel)
    text = f"/{command.name} {command.argument}".strip()
    return TurnRequest(
        conversation_key=f"{PLATFORM}:{command.team}:{command.channel}",
        kind=ConversationKind.PUSH,
        channel=PLATFORM,
        text=text,
        received_at=received_at,
        turn_id=turn_id,
        surface=surface(kind, command.channel, None),
        route=ReplyRoute(PLATFORM, {"channel": command.channel, "user": command.user}),
        person=person_id(command.team, command.user),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
