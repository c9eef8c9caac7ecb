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
from bot.inbox import InboxItem, OutboxPart
from bot.turns import (
    Attachment,
    Continuation,
    ConversationKind,
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
        body["continues"] = _maybe(Continuation, body.get("continues"))
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


def _maybe(kind: Any, body: Any) -> Any:
    return None if body is None else kind(**body)
