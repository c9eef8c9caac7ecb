"""Approvals: the calls waiting for a decision, and those decided in the last 30 days (who, when);
an operator mapped to an approver decides one here exactly as a press on the card's button would
(the desk's checks: approvers only, not the requester unless allowed, first decision wins; the
card in the chat is updated). Every decision asked for is audited, taken or not."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from bot.console.pages.common import Console
from bot.ports.approvals import PENDING, Approval

NAV = ("approvals", "Approvals")
DECIDED_DAYS = 30
LISTED = 500
SHOWN_ARGUMENTS = 2000  # characters of a call's arguments on the page


def install(app: web.Application, console: Console) -> None:
    async def listing(request: web.Request) -> web.Response:
        return await _page(console, request)

    async def decide(request: web.Request) -> web.Response:
        form = await request.post()
        approval_id = request.match_info["approval_id"]
        approve = form.get("decision") == "approve"
        notice = await _decide(console, request, approval_id, approve)
        return await _page(console, request, notice=notice)

    app.router.add_get("/approvals", listing, name="approvals")
    app.router.add_post("/approvals/{approval_id}/decide", decide, name="approval_decide")


async def _decide(console: Console, request: web.Request, approval_id: str, approve: bool) -> str:
    operator = console.operator(request)
    action = "approve" if approve else "deny"
    if operator.approver is None:
        answer = (
            f"Not decided: operator {operator.name!r} has no approver identity. Fix: set "
            'approver = "slack:<user id>" (an id in [approvals] approvers) for this operator '
            "in [console] operators."
        )
    elif console.inputs.desk is None:
        answer = "Not decided: approvals are not running in this process."
    else:
        pressed = await console.inputs.desk.press(approval_id, approve, operator.approver)
        answer = pressed.text
    await console.audit(request, action, f"approval {approval_id}", answer)
    return answer


async def _page(console: Console, request: web.Request, notice: str = "") -> web.Response:
    found = await console.inputs.store.approvals.listing(limit=LISTED)
    since = console.inputs.clock() - DECIDED_DAYS * 86_400
    pending = [_row(console, a) for a in found if a.state == PENDING]
    decided = [
        _row(console, a)
        for a in found
        if a.state != PENDING and (a.decided_at or a.created_at) >= since
    ]
    operator = console.operator(request)
    return console.render.page(
        "approvals.html",
        request,
        title="Approvals",
        pending=pending,
        decided=decided,
        notice=notice,
        approver=operator.approver,
    )


def _row(console: Console, a: Approval) -> dict[str, Any]:
    try:
        arguments = json.dumps(json.loads(a.arguments), indent=1, ensure_ascii=False)
    except ValueError:
        arguments = a.arguments
    if len(arguments) > SHOWN_ARGUMENTS:
        arguments = arguments[:SHOWN_ARGUMENTS] + " …"
    return {
        "id": a.id,
        "tool": a.tool,
        "arguments": arguments,
        "requester": a.requester,
        "approvers": ", ".join(a.approvers),
        "state": a.state,
        "asked": console.shown(a.created_at),
        "expires": console.shown(a.expires_at),
        "decided_by": a.decided_by or ("expiry" if a.state == "expired" else "–"),
        "decided_at": console.shown(a.decided_at),
        "conversation": a.conversation_key,
    }
