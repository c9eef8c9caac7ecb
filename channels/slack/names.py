"""Slack's names to what the model may know (pure): a `users.info` user as a Speaker,
`conversations.info` as a Surface or Viewing, and message markup as the plain text a person saw.

Platform ids never come out of here: `<@U123>` becomes `@handle` (or `@someone`), a conversation is
named by its name or its kind, never its id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.turns import Speaker, Surface, SurfaceKind, Viewing
from channels.slack.mrkdwn import unescape
from channels.slack.split import MESSAGE_BUDGET

UNKNOWN_PERSON = "someone"

_MARKUP = re.compile(r"<([^<>]*)>")
_SPACES = re.compile(r"[ \t]{2,}")


# --- speaker and surface ------------------------------------------------------------------------


def speaker_from_user(user: Mapping[str, Any] | None) -> Speaker:
    """A `users.info` user to a Speaker: real name (else display name), and the @handle."""
    if not user:
        return Speaker(name=UNKNOWN_PERSON)
    profile = user.get("profile") if isinstance(user.get("profile"), Mapping) else {}
    assert isinstance(profile, Mapping)
    handle = _first_text(profile.get("display_name"), user.get("name"))
    name = _first_text(profile.get("real_name"), user.get("real_name"), handle) or UNKNOWN_PERSON
    return Speaker(name=name, handle=handle)


def _first_text(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def surface_kind(
    info: Mapping[str, Any] | None, channel_type: str | None, channel_id: str
) -> SurfaceKind:
    """From conversations.info, else the event's channel_type, else the id's prefix."""
    if info:
        if info.get("is_im"):
            return SurfaceKind.DM
        if info.get("is_mpim"):
            return SurfaceKind.GROUP
        if info.get("is_channel") or info.get("is_group"):
            return SurfaceKind.CHANNEL
    by_type = {"im": SurfaceKind.DM, "mpim": SurfaceKind.GROUP}
    if channel_type in by_type:
        return by_type[channel_type]
    if channel_type in ("channel", "group"):
        return SurfaceKind.CHANNEL
    by_prefix = {"D": SurfaceKind.DM, "G": SurfaceKind.GROUP}
    return by_prefix.get(channel_id[:1], SurfaceKind.CHANNEL)


def build_surface(
    channel_id: str,
    kind: SurfaceKind,
    info: Mapping[str, Any] | None,
    dm_handle: str | None,
) -> Surface:
    """Name a channel by its name, a DM by the counterpart's handle; no name when unknown."""
    channel_name = _first_text(info.get("name")) if info else None
    name = dm_handle if kind is SurfaceKind.DM else channel_name
    return surface(kind, channel_id, name)


def surface(kind: SurfaceKind, surface_id: str, name: str | None) -> Surface:
    """A Slack surface: shared unless a DM; the deliverer's part size; later parts of a long
    answer go in the thread under the first."""
    return Surface(
        kind=kind,
        id=surface_id,
        name=name,
        shared=kind is not SurfaceKind.DM,
        message_budget=MESSAGE_BUDGET,
        platform="Slack",
        continues_in_thread=True,
    )


def viewing(channel: str, info: Mapping[str, Any] | None) -> Viewing:
    """The open channel as the model may know it: its kind and, for a channel, its name (from
    conversations.info; unnamed when the bot cannot see it). Never its id."""
    kind = surface_kind(info, None, channel)
    name = _first_text(info.get("name")) if info and kind is not SurfaceKind.DM else None
    return Viewing(kind=kind, name=name)


# --- text ---------------------------------------------------------------------------------------


def mentioned_users(text: str) -> set[str]:
    """The user ids of every `<@U…>` in a message, to resolve to handles."""
    found: set[str] = set()
    for match in _MARKUP.finditer(text):
        inner = match.group(1)
        if inner.startswith("@"):
            found.add(inner[1:].split("|", 1)[0])
    return found


def plain_text(text: str, handles: Mapping[str, str], strip_user: str | None = None) -> str:
    """Slack markup to the plain text a person saw: `<@U1>` → `@alice`, `<url|x>` → `x (url)`.

    `strip_user` (the bot itself) is removed entirely, as a mention is an address, not content.
    A mention nobody could resolve shows as `@someone`, never as the id.
    """

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            user = target[1:]
            if strip_user is not None and user == strip_user:
                return ""
            return "@" + (handles.get(user) or label.lstrip("@") or UNKNOWN_PERSON)
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return _special(target[1:], label)
        if label and label != target:
            return f"{label} ({target})"
        return target.removeprefix("mailto:")

    replaced = _MARKUP.sub(replace, text)
    if strip_user is not None:
        replaced = "\n".join(_SPACES.sub(" ", line).strip() for line in replaced.split("\n"))
    return unescape(replaced).strip()


def _special(command: str, label: str) -> str:
    """`<!here>`, `<!subteam^S1|@team>`, `<!date^…|fallback>`: the label Slack would show."""
    if label:
        return label
    name = command.split("^", 1)[0]
    return f"@{name}" if name in ("here", "channel", "everyone") else ""
