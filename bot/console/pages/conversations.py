"""Conversations: the list by channel, surface, agent, person and last activity (filterable); one
conversation's history with its speakers and its turn records (live); one turn's record (the
sealed request as sent, secrets redacted, tool calls, usage, outcome, trace id); and the reset
of a conversation (an audited change)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.console.pages.common import Console
from bot.logs import redact_json, redact_text
from bot.prompt.attachments import marker as attachment_marker
from bot.turns import AttachmentBlock, Block, TextBlock, ToolUseBlock
from bot.usage import AGENT, NOBODY

RECENT_TURNS = 500  # turn records read to tell each conversation's surface and people
MAX_LISTED = 500
# What a redirect after a change says, by a code (never text from the query: a link could say
# anything then).
NOTICES = {"reset": "The conversation was reset.", "nothing": "Nothing was stored: no change."}


@dataclass
class Place:
    """Where a conversation happens and who took part, from its recent turns."""

    surfaces: set[str] = field(default_factory=set)
    people: set[str] = field(default_factory=set)


NAV = ("conversations", "Conversations")  # (path, label) in the menu


def install(app: web.Application, console: Console) -> None:
    app.router.add_get("/conversations", _listing(console), name="conversations")
    app.router.add_get("/conversations/view", _view(console), name="conversation")
    app.router.add_post("/conversations/reset", _reset(console), name="conversation_reset")
    app.router.add_get("/turns/{turn_id}", _turn(console), name="turn")


async def _places(console: Console) -> dict[str, Place]:
    store = console.inputs.store
    records = await store.records.recent(limit=RECENT_TURNS)
    rows = {row.turn_id: row for row in await store.usage.rows(console.days_ago(30))}
    places: dict[str, Place] = defaultdict(Place)
    for record in records:
        row = rows.get(record.turn_id)
        if row is not None:
            places[record.conversation_key].surfaces.add(row.surface)
            places[record.conversation_key].people.add(row.person or NOBODY)
    return places


def _listing(console: Console) -> Any:
    async def handler(request: web.Request) -> web.Response:
        infos = await console.inputs.store.history.describe()
        places = await _places(console)
        surface, person = request.query.get("surface", ""), request.query.get("person", "")
        lines = []
        for info in infos:
            place = places.get(info.key, Place())
            if surface and surface not in place.surfaces:
                continue
            if person and person not in place.people:
                continue
            lines.append(
                {
                    "key": info.key,
                    "channel": info.key.partition(":")[0],
                    "agent": AGENT,
                    "surfaces": sorted(place.surfaces),
                    "people": sorted(place.people),
                    "last": console.shown(info.last_active),
                    "messages": info.messages,
                }
            )
        every = places.values()
        return console.render.page(
            "conversations.html",
            request,
            title="Conversations",
            lines=lines[:MAX_LISTED],
            surfaces=sorted({s for p in every for s in p.surfaces}),
            people=sorted({who for p in every for who in p.people}),
            surface=surface,
            person=person,
            notice=NOTICES.get(request.query.get("done", ""), ""),
        )

    return handler


def _view(console: Console) -> Any:
    async def handler(request: web.Request) -> web.Response:
        key = request.query.get("key", "")
        store = console.inputs.store
        entries = await store.history.load(key) if key else []
        if not entries and key not in await store.history.conversations():
            return console.render.page(
                "error.html",
                request,
                status=404,
                title="No such conversation",
                message="No stored conversation has this key (it may have been reset).",
                back=f"{console.render.base}/conversations",
            )
        messages = [
            {
                "role": e.role,
                "speaker": e.speaker or ("the bot" if e.role == "assistant" else "someone"),
                "at": console.shown(e.at),
                "summary": e.summary,
                "parts": [_block(block) for block in e.blocks],
            }
            for e in entries
        ]
        turns = await store.records.recent(key, limit=50)
        return console.render.page(
            "conversation.html",
            request,
            title="Conversation",
            key=key,
            messages=messages,
            turns=[
                {
                    "id": t.turn_id,
                    "at": console.shown(t.started_at),
                    "outcome": t.outcome,
                    "latency": t.latency_ms,
                    "input": t.input_tokens,
                    "output": t.output_tokens,
                }
                for t in turns
            ],
        )

    return handler


def _block(block: Block) -> dict[str, str]:
    if isinstance(block, TextBlock):
        return {"kind": "text", "text": block.text}
    if isinstance(block, AttachmentBlock):
        return {"kind": "note", "text": attachment_marker(block)}
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(dict(block.input), ensure_ascii=False)
        return {"kind": "tool", "text": f"tool call {block.name}: {arguments}"}
    marker = "tool error" if block.is_error else "tool result"
    return {"kind": "tool", "text": f"{marker}: {block.content}"}


def _reset(console: Console) -> Any:
    async def handler(request: web.Request) -> web.Response:
        form = await request.post()
        key = str(form.get("key", ""))
        forgot = await console.inputs.store.history.reset(key) if key else False
        outcome = "reset" if forgot else "nothing stored"
        await console.audit(request, "reset conversation", key, outcome)
        return console.see_other("conversations?done=" + ("reset" if forgot else "nothing"))

    return handler


def _turn(console: Console) -> Any:
    async def handler(request: web.Request) -> web.Response:
        turn_id = request.match_info["turn_id"]
        document = await console.inputs.store.records.show(turn_id)
        if document is None:
            return console.render.page(
                "error.html",
                request,
                status=404,
                title="No such turn",
                message="No turn record has this id (records are kept for a bounded time).",
            )
        details = document.get("details") or {}
        secrets = tuple(console.inputs.secrets.values())
        return console.render.page(
            "turn.html",
            request,
            title="Turn",
            turn=document,
            usage=document.get("usage") or {},
            trace_id=details.get("trace_id"),
            tool_calls=[
                {**call, "arguments": redact_json(call.get("arguments", {}))}
                for call in details.get("tool_calls", [])
            ],
            request_json=_pretty(document.get("request"), secrets),
            details_json=_pretty({k: v for k, v in details.items() if k != "tool_calls"}, secrets),
        )

    return handler


def _pretty(value: object, secrets: tuple[str, ...]) -> str:
    """Indented JSON with every secret redacted (the record is stored redacted already: this
    also covers a secret added to the environment since)."""
    return redact_text(json.dumps(value, indent=2, ensure_ascii=False, default=str), secrets)
