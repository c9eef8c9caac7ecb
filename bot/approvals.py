"""Approvals (SPEC §14): which tool calls wait for a person, the request, the decision, and the
turn that carries the outcome back to the model.

A call that needs an approval does not run in its turn: the tool answers the model at once that
it waits (so the history always holds a result for every call), the card goes to the
conversation, and the request is stored with the sha256 of the canonical arguments it shows. A
press is checked (approver, not the requester, still pending) and decided with a conditional
update, so the first decision wins on any replica. Approved, the call runs once with the stored
arguments (their hash checked again); approved, denied or expired, a continuation turn enters
the conversation's lane with the outcome, and the model tells the person.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol

import structlog
from pydantic import Field, field_validator

from bot import replies
from bot.config import Section
from bot.errors import ToolError
from bot.ports.approvals import (
    APPROVED,
    DENIED,
    EXPIRED,
    PENDING,
    Approval,
    ApprovalCards,
    ApprovalRecords,
    Card,
    PressAnswer,
)
from bot.ports.tools import Tool, ToolOutput, ToolSpec
from bot.sql.request_codec import decode_request, encode_request
from bot.surfaces import APPROVER, TOOL_GLOB, SurfaceRule
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)

MAX_SHOWN_ARGUMENTS = 3000  # bytes of canonical JSON a card shows; a longer call is refused
MAX_RESULT = 16_000  # characters of an approved call's result kept with the request
# A decided request whose outcome is still not kept this long after the decision was left by a
# process that stopped (longer than any call may take: timeout_seconds is at most an hour).
STRANDED_AFTER = 2 * 3600.0
ID_PATTERN = r"[A-Za-z0-9_-]{16,32}"  # what token_urlsafe(18) gives, with room


class ApprovalSettings(Section):
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool = False
    expire_minutes: Annotated[int, Field(ge=1, le=10_080)] = 30
    allow_without_approval: list[Annotated[str, Field(pattern=TOOL_GLOB)]] = Field(
        default_factory=list
    )

    @field_validator("approvers")
    @classmethod
    def _platform_ids(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.fullmatch(APPROVER, value):
                raise ValueError(
                    f"{value!r} is not a platform:person id; write each approver as "
                    '"slack:<user id>" (e.g. "slack:U0123ABCD") or "telegram:<user id>" '
                    '(e.g. "telegram:4242")'
                )
        return values


class Hinted(Protocol):
    """What a tool's server says of it (an MCP tool's `info`): its names and its hints."""

    @property
    def tool(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def read_only(self) -> bool | None: ...

    @property
    def destructive(self) -> bool | None: ...


def needs_approval(info: Hinted, approve: Sequence[str], allow_without: Sequence[str]) -> bool:
    """Whether a call waits: matched by its server's `approve` globs (its own name or the name
    the model sees), or destructive and not read-only, unless the operator allowed it. A
    read-only tool never waits."""
    if info.read_only:
        return False
    if any(fnmatch.fnmatchcase(info.name, glob) for glob in allow_without):
        return False
    matched = any(
        fnmatch.fnmatchcase(info.tool, glob) or fnmatch.fnmatchcase(info.name, glob)
        for glob in approve
    )
    return matched or bool(info.destructive)


def canonical(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def requester_of(request: TurnRequest) -> str:
    """The person who asked, as approvers are named (`platform:user id`)."""
    person = request.person or ""
    return f"{request.channel}:{person.rsplit(':', 1)[-1]}" if person else ""


def shown(text: str, limit: int) -> str:
    """`text` for a card: control characters gone, at most `limit` characters."""
    clean = "".join(ch if ch.isprintable() or ch in "\n\t" else "?" for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


class TurnSink(Protocol):
    async def submit(
        self, request: TurnRequest, *, source: str, marks: Sequence[str]
    ) -> object: ...


class ApprovalDesk:
    """Requests, presses, expiry and continuations, over the store's approval rows."""

    def __init__(
        self,
        book: ApprovalRecords,
        settings: ApprovalSettings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self._settings = settings
        self._clock = clock
        self._cards: dict[str, ApprovalCards] = {}
        self._sink: TurnSink | None = None
        self._tools: Callable[[], Sequence[Any]] = tuple
        self._tasks: set[asyncio.Task[None]] = set()
        self.observers: list[Callable[[str], None]] = []  # told each request and decision

    def connect(
        self,
        sink: TurnSink,
        cards: Mapping[str, ApprovalCards],
        tools: Callable[[], Sequence[Any]],
    ) -> None:
        """Where continuations go, the channels that show cards, and the MCP tools (by name)."""
        self._sink = sink
        self._cards = dict(cards)
        self._tools = tools

    def _count(self, what: str) -> None:
        for observer in self.observers:
            observer(what)

    # --- which calls wait ---

    def gate(
        self,
        tools_for: Callable[..., list[Tool]],
    ) -> Callable[..., list[Tool]]:
        """`tools_for` with every tool that needs an approval replaced by its gated twin."""

        def gated(request: TurnRequest, recall: Any, rule: SurfaceRule | None = None) -> list[Tool]:
            return [self._gated(tool, request, rule) for tool in tools_for(request, recall, rule)]

        return gated

    def _gated(self, tool: Tool, request: TurnRequest, rule: SurfaceRule | None) -> Tool:
        info = getattr(tool, "info", None)
        approve = getattr(tool, "approve", ())
        if info is None or not needs_approval(info, approve, self._settings.allow_without_approval):
            return tool
        return _Gated(self, tool.spec, request, rule)

    def approvers_for(
        self, platform: str, requester: str, rule: SurfaceRule | None = None
    ) -> tuple[str, ...]:
        """Who may decide a call asked for on `platform` under `rule` (the rule's approvers when
        it names them, else `[approvals] approvers`; never the requester, by default)."""
        listed = self._settings.approvers
        if rule is not None and rule.approvers is not None:
            listed = rule.approvers
        found = [a for a in listed if a.startswith(f"{platform}:")]
        if not self._settings.requester_may_approve:
            found = [a for a in found if a != requester]
        return tuple(found)

    # --- a call that waits ---

    async def ask(
        self,
        spec: ToolSpec,
        request: TurnRequest,
        arguments: Mapping[str, Any],
        rule: SurfaceRule | None = None,
    ) -> ToolOutput:
        cards = self._cards.get(request.channel)
        if cards is None or request.route is None:
            raise ToolError(replies.approval_unavailable(spec.name))
        requester = requester_of(request)
        approvers = self.approvers_for(request.channel, requester, rule)
        if not approvers:
            raise ToolError(replies.approval_no_approvers(spec.name))
        text = canonical(arguments)
        if len(text.encode("utf-8")) > MAX_SHOWN_ARGUMENTS:
            raise ToolError(replies.approval_too_long(spec.name, MAX_SHOWN_ARGUMENTS))
        now = self._clock()
        approval = Approval(
            id=secrets.token_urlsafe(18),
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            tool=spec.name,
            arguments=text,
            digest=digest(text),
            requester=requester,
            approvers=approvers,
            request=encode_request(request),
            created_at=now,
            expires_at=now + self._settings.expire_minutes * 60,
        )
        await self._book.add(approval)
        card = Card(
            approval_id=approval.id,
            tool=spec.name,
            arguments=shown(text, MAX_SHOWN_ARGUMENTS),
            requester=shown(_who(request), 200),
            text=replies.approval_card(
                spec.name,
                shown(text, MAX_SHOWN_ARGUMENTS),
                shown(_who(request), 200),
                self._settings.expire_minutes,
            ),
            approve_label=replies.APPROVE,
            deny_label=replies.DENY,
        )
        try:
            where = await cards.post_card(request.route, card)
        except Exception as exc:  # the card could not be shown: nobody can decide, so deny now
            log.warning("approval_card_failed", approval_id=approval.id, error=type(exc).__name__)
            await self._book.decide(approval.id, DENIED, "host", self._clock())
            raise ToolError(replies.approval_unavailable(spec.name)) from None
        await self._book.set_card(approval.id, where)
        self._count("requested")
        log.info(
            "approval_requested",
            approval_id=approval.id,
            tool=spec.name,
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
        )
        return ToolOutput(
            replies.approval_waiting(spec.name, self._settings.expire_minutes),
            outcome="waiting_approval",
            facts={"approval_id": approval.id},
        )

    # --- a press ---

    async def press(self, approval_id: str, approve: bool, presser: str) -> PressAnswer:
        """Decide a press, or say privately why it changed nothing (never raises: the platform
        wants every press answered)."""
        try:
            return await self._press(approval_id, approve, presser)
        except Exception as exc:  # the store cannot be read or written now
            log.warning("approval_press_failed", error=type(exc).__name__)
            return PressAnswer(replies.APPROVAL_TRY_AGAIN, changed=False)

    async def _press(self, approval_id: str, approve: bool, presser: str) -> PressAnswer:
        approval = await self._book.get(approval_id) if _valid_id(approval_id) else None
        if approval is None:
            log.warning("approval_press_unknown", presser=presser)
            return PressAnswer(replies.APPROVAL_UNKNOWN, changed=False)
        if approval.state != PENDING:
            return PressAnswer(replies.approval_already(approval.state), changed=False)
        if self._clock() >= approval.expires_at:
            await self.expire_due()
            return PressAnswer(replies.approval_already(EXPIRED), changed=False)
        if presser == approval.requester and not self._settings.requester_may_approve:
            log.info("approval_press_refused", approval_id=approval_id, why="requester")
            return PressAnswer(replies.APPROVAL_OWN_REQUEST, changed=False)
        if presser not in approval.approvers:
            log.info("approval_press_refused", approval_id=approval_id, why="not an approver")
            return PressAnswer(replies.APPROVAL_NOT_YOURS, changed=False)
        state = APPROVED if approve else DENIED
        if not await self._book.decide(approval_id, state, presser, self._clock()):
            current = await self._book.get(approval_id)
            return PressAnswer(
                replies.approval_already(current.state if current else state), changed=False
            )
        self._decided(approval, state, presser)
        return PressAnswer(replies.approval_recorded(state), changed=True)

    async def expire_due(self) -> int:
        """Deny every pending request whose time is up; how many this call expired."""
        expired = 0
        for approval in await self._book.due(self._clock()):
            if await self._book.decide(approval.id, EXPIRED, "expiry", self._clock()):
                self._decided(approval, EXPIRED, None)
                expired += 1
        return expired

    def _decided(self, approval: Approval, state: str, by: str | None) -> None:
        self._count(state)
        log.info("approval_decided", approval_id=approval.id, state=state, tool=approval.tool)
        task = asyncio.create_task(self._carry_on(approval, state, by))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def idle(self) -> None:
        """Wait for the continuations under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _carry_on(self, approval: Approval, state: str, by: str | None) -> None:
        try:
            await self._carry_on_inner(approval, state, by)
        except Exception:  # logged with its traceback; the decision itself is stored
            log.exception("approval_continuation_failed", approval_id=approval.id)

    async def _carry_on_inner(self, approval: Approval, state: str, by: str | None) -> None:
        """Close the card, run an approved call once, and queue the turn that tells the model."""
        at = datetime.fromtimestamp(self._clock(), UTC)
        request = decode_request(approval.request)
        await self._close(approval, request, state, by, at)
        if state == APPROVED:
            outcome = await self._run(approval)
            note = replies.approval_ran(approval.tool, approval.arguments, at, outcome)
        else:
            outcome = ""
            note = replies.approval_refused(approval.tool, approval.arguments, state, at)
        if not await self._book.finish(approval.id, outcome[:MAX_RESULT]):
            return  # a later process already told the model (it took this for stranded)
        await self._follow(approval, request, note, at)

    async def recover(self) -> int:
        """Tell the model about requests decided by a process that stopped before it did: a
        denied or expired one as usual; an approved one never runs again (at most once), and the
        note says it is not known whether it ran. How many this call took."""
        taken = 0
        for approval in await self._book.stranded(self._clock() - STRANDED_AFTER):
            approved = approval.state == APPROVED
            outcome = replies.APPROVAL_INTERRUPTED if approved else ""
            if not await self._book.finish(approval.id, outcome):
                continue
            at = datetime.fromtimestamp(self._clock(), UTC)
            if approval.state == APPROVED:
                note = replies.approval_ran(approval.tool, approval.arguments, at, outcome)
            else:
                note = replies.approval_refused(
                    approval.tool, approval.arguments, approval.state, at
                )
            log.warning("approval_recovered", approval_id=approval.id, state=approval.state)
            request = decode_request(approval.request)
            decided = datetime.fromtimestamp(approval.decided_at or self._clock(), UTC)
            await self._close(approval, request, approval.state, approval.decided_by, decided)
            await self._follow(approval, request, note, at)
            taken += 1
        return taken

    async def _close(
        self, approval: Approval, request: TurnRequest, state: str, by: str | None, at: datetime
    ) -> None:
        """Replace the card with who decided and when (its buttons gone)."""
        cards = self._cards.get(request.channel)
        if cards is None or not approval.card:
            return
        try:
            await cards.close_card(
                approval.card, replies.approval_closed(approval.tool, state, by, at)
            )
        except Exception as exc:
            log.warning("approval_card_update_failed", error=type(exc).__name__)

    async def _follow(
        self, approval: Approval, request: TurnRequest, note: str, at: datetime
    ) -> None:
        """Queue the continuation turn: `note` in the conversation's lane, taken once."""
        if self._sink is None:
            return
        follow = replace(
            request,
            text=note,
            turn_id=uuid.uuid4().hex,
            received_at=at,
            preceding=(),
            attachments=(),
            speaker=None,  # the host speaks, not the person who asked
        )
        await self._sink.submit(follow, source="approval", marks=[f"approval:{approval.id}"])

    async def _run(self, approval: Approval) -> str:
        """The approved call, exactly as shown: its arguments' hash is checked first."""
        if digest(approval.arguments) != approval.digest:
            log.error("approval_digest_mismatch", approval_id=approval.id)
            return replies.APPROVAL_TAMPERED
        tool = next((t for t in self._tools() if t.spec.name == approval.tool), None)
        if tool is None:
            return replies.approval_tool_gone(approval.tool)
        try:
            returned = await tool(json.loads(approval.arguments))
        except ToolError as exc:
            return str(exc)
        except Exception as exc:  # a tool bug becomes the outcome the model reads
            return f"the tool failed: {type(exc).__name__}"
        return returned.text if isinstance(returned, ToolOutput) else str(returned)

    async def listing(self, *, pending: bool = False) -> list[Approval]:
        return await self._book.listing(pending=pending)


class _Gated:
    """A tool that needs an approval, as one turn offers it: calling it asks."""

    def __init__(
        self, desk: ApprovalDesk, spec: ToolSpec, request: TurnRequest, rule: SurfaceRule | None
    ) -> None:
        self.spec = spec
        self._desk = desk
        self._request = request
        self._rule = rule

    async def __call__(self, arguments: Mapping[str, Any]) -> ToolOutput:
        return await self._desk.ask(self.spec, self._request, arguments, self._rule)


def _who(request: TurnRequest) -> str:
    speaker = request.speaker
    if speaker is None:
        return "someone"
    return f"{speaker.name} (@{speaker.handle})" if speaker.handle else speaker.name


def _valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None
