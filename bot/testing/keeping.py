"""Attachments and approval requests of the in-memory store, with the SQL engines' rules
(`bot.store.sql.attachments`, `bot.store.sql.approvals`): bytes kept once by content id and read
only by the conversations that shared them, bounded by idle days and total bytes (least recently
used first); an approval is decided once, and its outcome kept once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import structlog

from bot.config import AttachmentSettings
from bot.errors import DuplicateKey
from bot.ports.approvals import APPROVED, PENDING, Approval, ApprovalRecords
from bot.ports.attachments import AttachmentStore, StoredAttachment
from bot.testing.tables import AttachmentRow, Opened

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_MAX_LOAD = 500  # ids per read, as the SQL engines bound them


class MemoryAttachments(AttachmentStore):
    """The AttachmentStore port in memory."""

    def __init__(self, opened: Opened, settings: AttachmentSettings) -> None:
        self._opened = opened
        self._settings = settings

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        tables = self._opened.write("attachments")
        now = tables.clock()
        found = tables.attachments.get(content_id)
        if found is None:
            tables.attachments[content_id] = AttachmentRow(media_type, data, now)
        else:
            found.used_at = now
        tables.attachment_refs.add((key, content_id))
        self._prune(content_id, now)

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        self._opened.check_open()
        tables = self._opened.tables
        wanted = list(dict.fromkeys(content_ids))[:_MAX_LOAD]
        found = {
            cid: tables.attachments[cid].data
            for cid in wanted
            if cid in tables.attachments and (key, cid) in tables.attachment_refs
        }
        for cid in found:
            tables.attachments[cid].used_at = tables.clock()
        return found

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        self._opened.check_open()
        if not prefix or len(prefix) > 64 or any(c not in "0123456789abcdef" for c in prefix):
            return None
        tables = self._opened.tables
        matches = [
            cid
            for cid in tables.attachments
            if cid.startswith(prefix) and (key, cid) in tables.attachment_refs
        ]
        if len(matches) != 1:
            return None
        row = tables.attachments[matches[0]]
        return StoredAttachment(matches[0], row.media_type, row.data)

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        tables = self._opened.write("attachment_refs")
        for cid in list(dict.fromkeys(content_ids))[:_MAX_LOAD]:
            tables.attachment_refs.discard((key, cid))

    def _prune(self, keep: str, now: float) -> None:
        tables = self._opened.tables
        cutoff = now - self._settings.store_idle_days * _DAY
        idle = [c for c, row in tables.attachments.items() if row.used_at < cutoff and c != keep]
        for cid in idle:
            del tables.attachments[cid]
        total = sum(len(row.data) for row in tables.attachments.values())
        dropped = 0
        for cid, row in sorted(tables.attachments.items(), key=lambda item: item[1].used_at):
            if total <= self._settings.store_max_bytes:
                break
            if cid != keep:
                del tables.attachments[cid]
                total -= len(row.data)
                dropped += 1
        if idle or dropped:
            tables.attachment_refs = {
                ref for ref in tables.attachment_refs if ref[1] in tables.attachments
            }
            log.info("attachments_pruned", idle=len(idle), over_bytes=dropped)


class MemoryApprovals(ApprovalRecords):
    """The approval requests in memory: add, read, decide once, keep the outcome once, list."""

    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    @property
    def _rows(self) -> dict[str, Approval]:
        return self._opened.tables.approvals

    async def add(self, approval: Approval) -> None:
        self._opened.write("approvals")
        if approval.id in self._rows:
            raise DuplicateKey(f"approvals: {approval.id} is stored already")
        self._rows[approval.id] = approval

    async def get(self, approval_id: str) -> Approval | None:
        self._opened.check_open()
        return self._rows.get(approval_id)

    async def shown(self, turn_id: str, tool: str, digest: str) -> Approval | None:
        """The request whose card turn `turn_id` already showed for this call, if any."""
        self._opened.check_open()
        found = [
            a
            for a in self._rows.values()
            if (a.turn_id, a.tool, a.digest) == (turn_id, tool, digest) and a.card
        ]
        return min(found, key=lambda a: a.created_at) if found else None

    async def counts(self, turn_id: str, conversation_key: str) -> tuple[int, int]:
        """How many requests turn `turn_id` made, and how many are pending in the conversation."""
        self._opened.check_open()
        rows = self._rows.values()
        made = sum(1 for a in rows if a.turn_id == turn_id)
        waiting = sum(
            1 for a in rows if a.conversation_key == conversation_key and a.state == PENDING
        )
        return made, waiting

    async def set_card(self, approval_id: str, card: dict[str, Any]) -> None:
        self._opened.write("approvals")
        if (found := self._rows.get(approval_id)) is not None:
            self._rows[approval_id] = replace(found, card=dict(card))

    async def decide(self, approval_id: str, state: str, by: str, at: float) -> bool:
        """Move a pending request to `state`; False when it was no longer pending."""
        self._opened.write("approvals")
        found = self._rows.get(approval_id)
        if found is None or found.state != PENDING:
            return False
        self._rows[approval_id] = replace(found, state=state, decided_by=by, decided_at=at)
        return True

    async def start(self, approval_id: str, at: float) -> bool:
        """Mark an approved request's call as running, once (False when marked before or its
        outcome is kept already)."""
        self._opened.write("approvals")
        found = self._rows.get(approval_id)
        if (
            found is None
            or found.state != APPROVED
            or found.running_at is not None
            or found.result is not None
        ):
            return False
        self._rows[approval_id] = replace(found, running_at=at)
        return True

    async def finish(self, approval_id: str, result: str) -> bool:
        """Keep the outcome of a decided request unless one is kept already (False then)."""
        self._opened.write("approvals")
        found = self._rows.get(approval_id)
        if found is None or found.result is not None:
            return False
        self._rows[approval_id] = replace(found, result=result)
        return True

    async def unfinished(self, since: float) -> list[Approval]:
        """Requests decided since `since` whose continuation has not kept an outcome yet."""
        self._opened.check_open()
        return sorted(
            (
                a
                for a in self._rows.values()
                if a.state != PENDING
                and a.result is None
                and a.decided_at is not None
                and a.decided_at >= since
            ),
            key=lambda a: a.decided_at or 0.0,
        )

    async def due(self, now: float) -> list[Approval]:
        """Pending requests whose time is up."""
        self._opened.check_open()
        return sorted(
            (a for a in self._rows.values() if a.state == PENDING and a.expires_at <= now),
            key=lambda a: a.expires_at,
        )

    async def listing(self, *, pending: bool = False, limit: int = 100) -> list[Approval]:
        self._opened.check_open()
        rows = [a for a in self._rows.values() if not pending or a.state == PENDING]
        return sorted(rows, key=lambda a: a.created_at, reverse=True)[:limit]
