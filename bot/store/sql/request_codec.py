"""How a TurnRequest and a ReplyRoute are stored in the inbox and outbox: one JSON document each.

Every field round-trips, the hidden route included (it never leaves the host: the inbox is
host-side like the route itself). Nested values are the turn model's small dataclasses, written
field by field, so a field added to one of them is stored without touching this module; a
document this program cannot read raises `UnreadableRecord`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

import structlog

from bot.errors import UnreadableRecord
from bot.ports.intake import InboxItem
from bot.ports.outbox import OutboxPart
from bot.turns import (
    Attachment,
    Continuation,
    ConversationKind,
    Lookups,
    Origin,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
    Viewing,
)

log = structlog.get_logger(__name__)

# An outbox row's columns: part_id, turn_id, conversation_key, idx, route, text, platform_id.
PartRow = tuple[str, str, str, int, str, str, str | None]


def inbox_items(rows: Iterable[Any]) -> list[InboxItem]:
    """Inbox rows (`id`, `attempts`, `request`) as items; an unreadable one is logged and
    skipped. Rows of either engine (they are read by column name)."""
    items = []
    for row in rows:
        try:
            request = decode_request(row["request"])
        except UnreadableRecord as exc:
            log.error("inbox_item_unreadable", item=row["id"], reason=str(exc))
            continue
        items.append(InboxItem(int(row["id"]), request, int(row["attempts"])))
    return items


def outbox_parts(rows: Iterable[Any]) -> list[OutboxPart]:
    """Outbox rows as parts; an unreadable route is logged and its part skipped."""
    parts = []
    for row in rows:
        try:
            route = decode_route(row["route"])
        except UnreadableRecord as exc:
            log.error("outbox_part_unreadable", part_id=row["part_id"], reason=str(exc))
            continue
        parts.append(
            OutboxPart(
                part_id=row["part_id"],
                turn_id=row["turn_id"],
                conversation_key=row["conversation_key"],
                index=int(row["idx"]),
                route=route,
                text=row["text"],
                platform_id=row["platform_id"],
            )
        )
    return parts


def encode_request(request: TurnRequest) -> str:
    body = _plain(request)
    if request.continues is None:  # absent: rows and documents from before read the same
        del body["continues"]
    if request.tools is None:
        del body["tools"]
    if request.origin is None:
        del body["origin"]
    if request.agent is None:
        del body["agent"]
    if not request.hops:
        del body["hops"]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def part_row(part: OutboxPart) -> PartRow:
    """A part as the outbox table's columns (the reverse of `outbox_parts`)."""
    return (
        part.part_id,
        part.turn_id,
        part.conversation_key,
        part.index,
        encode_route(part.route),
        part.text,
        part.platform_id,
    )


def encode_route(route: ReplyRoute) -> str:
    return json.dumps(_plain(route), ensure_ascii=False, separators=(",", ":"))


def decode_route(text: str) -> ReplyRoute:
    return _route(_object(text))


def decode_request(text: str) -> TurnRequest:
    body = dict(_object(text))
    try:
        body["kind"] = ConversationKind(body["kind"])
        body["received_at"] = datetime.fromisoformat(body["received_at"])
        body["speaker"] = _maybe(Speaker, body.get("speaker"))
        surface = body.get("surface")
        if surface is not None:
            body["surface"] = Surface(**{**surface, "kind": SurfaceKind(surface["kind"])})
        body["preceding"] = tuple(
            PrecedingMessage(**{**m, "at": datetime.fromisoformat(m["at"])})
            for m in body.get("preceding", ())
        )
        body["attachments"] = tuple(Attachment(**a) for a in body.get("attachments", ()))
        viewing = body.get("viewing")
        if viewing is not None:
            body["viewing"] = Viewing(**{**viewing, "kind": SurfaceKind(viewing["kind"])})
        route = body.get("route")
        body["route"] = _route(route) if route is not None else None
        body["lookups"] = _maybe(Lookups, body.get("lookups"))
        if body["route"] is not None and body["lookups"] is None:
            body["route"], body["lookups"] = _legacy_lookups(body["route"])
        body["continues"] = _maybe(Continuation, body.get("continues"))
        tools = body.get("tools")
        body["tools"] = None if tools is None else tuple(str(name) for name in tools)
        origin = body.get("origin")
        body["origin"] = None if origin is None else Origin(origin)
        return TurnRequest(**body)
    except (KeyError, TypeError, ValueError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise UnreadableRecord(f"not a stored turn request ({reason})") from None


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _object(text: str) -> Mapping[str, Any]:
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UnreadableRecord(f"not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise UnreadableRecord("not a JSON object")
    return body


def _route(body: Any) -> ReplyRoute:
    if not isinstance(body, dict) or not isinstance(body.get("platform"), str):
        raise UnreadableRecord("a route needs a platform")
    values = body.get("values", {})
    if not isinstance(values, dict):
        raise UnreadableRecord("a route's values are not an object")
    return ReplyRoute(platform=body["platform"], values=values)


# Before `Lookups` had a field of its own, Slack kept them in its route: what was left to look up
# under "lookup", the channel open beside an assistant thread under "viewing", the ids in the
# route's own values. A request stored by such a version (still pending when it was upgraded) is
# read into the new form here; it is written again only in the new form.
_LEGACY_LOOKUP, _LEGACY_VIEWING = "lookup", "viewing"


def _legacy_lookups(route: ReplyRoute) -> tuple[ReplyRoute, Lookups | None]:
    """The route without the lookups an older version kept in it, and those lookups."""
    values = route.values
    lookup = values.get(_LEGACY_LOOKUP)
    if not isinstance(lookup, Mapping):
        return route, None
    kept = {k: v for k, v in values.items() if k not in (_LEGACY_LOOKUP, _LEGACY_VIEWING)}
    ids = [values.get(key) for key in ("user", "channel", "message_ts")]
    if not all(isinstance(value, str) and value for value in ids):
        return ReplyRoute(route.platform, kept), None  # nothing it could be looked up by
    speaker, surface, message = (str(value) for value in ids)
    return ReplyRoute(route.platform, kept), Lookups(
        speaker=speaker,
        surface=surface,
        text=str(lookup.get("text") or ""),
        message=message,
        thread=_text_or_none(lookup.get("thread_ts")),
        surface_type=_text_or_none(lookup.get("channel_type")),
        speaker_name=_text_or_none(lookup.get("bot_name")),
        viewing=_text_or_none(values.get(_LEGACY_VIEWING)),
        bot_user=_text_or_none(lookup.get("bot_user_id")),
        bot_author=_text_or_none(lookup.get("bot_id")),
    )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _maybe(kind: Any, body: Any) -> Any:
    return None if body is None else kind(**body)
