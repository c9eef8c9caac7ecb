"""The approval requests (`bot.tools.approvals.ApprovalDesk`'s rows), on either engine.

A decision is one conditional UPDATE (`... WHERE state = 'pending'`): on a shared database the
first replica to decide wins and a second press changes nothing. Expiry is a decision too. The
approved call's running mark is one too (`... WHERE running_at IS NULL`): it is set before the
call, so a call whose process stopped midway is never run a second time.
"""

from __future__ import annotations

import json
from typing import Any

from bot.ports.approvals import Approval
from bot.ports.sql import Row, SqlDatabase
from bot.store.sql.request_codec import decode_request, encode_request

_COLUMNS = (
    "id, turn_id, conversation_key, tool, arguments, digest, requester, approvers, request, "
    "card, created_at, expires_at, state, decided_by, decided_at, result, running_at"
)


def _approval(row: Row) -> Approval:
    return Approval(
        id=row[0],
        turn_id=row[1],
        conversation_key=row[2],
        tool=row[3],
        arguments=row[4],
        digest=row[5],
        requester=row[6],
        approvers=tuple(json.loads(row[7])),
        request=decode_request(row[8]),
        card=json.loads(row[9]),
        created_at=float(row[10]),
        expires_at=float(row[11]),
        state=row[12],
        decided_by=row[13],
        decided_at=None if row[14] is None else float(row[14]),
        result=row[15],
        running_at=None if row[16] is None else float(row[16]),
    )


class SqlApprovals:
    """The durable approval requests: add, read, decide once, list."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def add(self, approval: Approval) -> None:
        a = approval
        await self._db.transaction(
            lambda tx: tx.execute(
                f"INSERT INTO approvals ({_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                a.id,
                a.turn_id,
                a.conversation_key,
                a.tool,
                a.arguments,
                a.digest,
                a.requester,
                json.dumps(list(a.approvers)),
                encode_request(a.request),
                json.dumps(dict(a.card)),
                a.created_at,
                a.expires_at,
                a.state,
                a.decided_by,
                a.decided_at,
                a.result,
                a.running_at,
            )
        )

    async def get(self, approval_id: str) -> Approval | None:
        row = await self._db.reads().fetch_one(
            f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", approval_id
        )
        return None if row is None else _approval(row)

    async def shown(self, turn_id: str, tool: str, digest: str) -> Approval | None:
        """The request whose card turn `turn_id` already showed for this call, if any."""
        row = await self._db.reads().fetch_one(
            f"SELECT {_COLUMNS} FROM approvals WHERE turn_id = ? AND tool = ? AND digest = ? "
            "AND card <> '{}' ORDER BY created_at LIMIT 1",
            turn_id,
            tool,
            digest,
        )
        return None if row is None else _approval(row)

    async def counts(self, turn_id: str, conversation_key: str) -> tuple[int, int]:
        """How many requests turn `turn_id` made, and how many are pending in the conversation."""
        reads = self._db.reads()
        made = await reads.fetch_one("SELECT COUNT(*) FROM approvals WHERE turn_id = ?", turn_id)
        waiting = await reads.fetch_one(
            "SELECT COUNT(*) FROM approvals WHERE conversation_key = ? AND state = 'pending'",
            conversation_key,
        )
        return (int(made[0]) if made else 0, int(waiting[0]) if waiting else 0)

    async def set_card(self, approval_id: str, card: dict[str, Any]) -> None:
        await self._db.transaction(
            lambda tx: tx.execute(
                "UPDATE approvals SET card = ? WHERE id = ?", json.dumps(card), approval_id
            )
        )

    async def decide(self, approval_id: str, state: str, by: str, at: float) -> bool:
        """Move a pending request to `state`; False when it was no longer pending."""
        changed = await self._db.transaction(
            lambda tx: tx.execute(
                "UPDATE approvals SET state = ?, decided_by = ?, decided_at = ? "
                "WHERE id = ? AND state = 'pending'",
                state,
                by,
                at,
                approval_id,
            )
        )
        return changed == 1

    async def start(self, approval_id: str, at: float) -> bool:
        """Mark an approved request's call as running, once: False when it was marked before
        (a run of its continuation stopped during the call) or its outcome is kept already."""
        changed = await self._db.transaction(
            lambda tx: tx.execute(
                "UPDATE approvals SET running_at = ? WHERE id = ? AND state = 'approved' "
                "AND running_at IS NULL AND result IS NULL",
                at,
                approval_id,
            )
        )
        return changed == 1

    async def finish(self, approval_id: str, result: str) -> bool:
        """Keep the outcome of a decided request (an approved call's result, bounded by the
        caller; empty for one that did not run) unless one is kept already: False then."""
        changed = await self._db.transaction(
            lambda tx: tx.execute(
                "UPDATE approvals SET result = ? WHERE id = ? AND result IS NULL",
                result,
                approval_id,
            )
        )
        return changed == 1

    async def unfinished(self, since: float) -> list[Approval]:
        """Requests decided since `since` whose continuation has not kept an outcome yet (it
        waits in its lane, or was never submitted: its decider stopped first)."""
        rows = await self._db.reads().fetch_all(
            f"SELECT {_COLUMNS} FROM approvals WHERE state <> 'pending' AND result IS NULL "
            "AND decided_at >= ? ORDER BY decided_at",
            since,
        )
        return [_approval(row) for row in rows]

    async def due(self, now: float) -> list[Approval]:
        """Pending requests whose time is up."""
        rows = await self._db.reads().fetch_all(
            f"SELECT {_COLUMNS} FROM approvals WHERE state = 'pending' AND expires_at <= ? "
            "ORDER BY expires_at",
            now,
        )
        return [_approval(row) for row in rows]

    async def listing(self, *, pending: bool = False, limit: int = 100) -> list[Approval]:
        where = "WHERE state = 'pending' " if pending else ""
        rows = await self._db.reads().fetch_all(
            f"SELECT {_COLUMNS} FROM approvals {where}ORDER BY created_at DESC LIMIT ?", limit
        )
        return [_approval(row) for row in rows]
