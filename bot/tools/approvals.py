"""Approvals (SPEC §14): which tool calls wait for a person, the request, the decision, and the
continuation that carries the outcome back to the model.

A call that needs an approval does not run in its turn: the tool answers the model at once that
it waits (so the history always holds a result for every call) and suspends the turn
(`ToolOutput.suspends`), the card goes to the conversation, and the request is stored with the
sha256 of the canonical arguments it shows. A press is checked (approver, not the requester,
still pending) and decided with a conditional update, so the first decision wins on any replica.
A decision (a press, or expiry) runs nothing: it closes the card and submits the continuation
turn through the host's intake, deduplicated by its mark. That turn runs in the conversation's
lane, in order, on whichever replica; there the desk, as its `Resumer`, runs an approved call at
most once (hash checked, marked running first) with the stored arguments, and returns the note
the model reads next.
"""

from __future__ import annotations

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
from typing import Annotated, Any, Literal

import structlog
from pydantic import Field, field_validator

from bot import replies
from bot.config import Section
from bot.errors import ToolError
from bot.policy.surfaces import APPROVER, TOOL_GLOB, SurfaceRule
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
from bot.ports.intake import Admission, TurnSink
from bot.ports.tools import Hinted, Tool, ToolOutput, ToolSpec
from bot.prompt.fence import NAME_MAX_CHARS, neutralize, one_line, person_label, scrub
from bot.turns import Continuation, TurnRequest

log = structlog.get_logger(__name__)

MAX_SHOWN_ARGUMENTS = 3000  # bytes of canonical JSON a card shows; a longer call is refused
MAX_RESULT = 16_000  # characters of an approved call's result kept with the request
KIND = "approval"  # the Continuation kind this desk resumes
# Recovery submits continuations of decisions this recent: the inbox dedupes marks for 7 days,
# so a continuation submitted again is still recognised as the same one.
RECOVER_WITHIN = 6 * 86_400.0
ID_PATTERN = r"[A-Za-z0-9_-]{16,32}"  # what token_urlsafe(18) gives, with room


class ApprovalSettings(Section):
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool = False
    expire_minutes: Annotated[int, Field(ge=1, le=10_080)] = 30
    allow_without_approval: list[Annotated[str, Field(pattern=TOOL_GLOB)]] = Field(
        default_factory=list
    )
    # One model answer may ask for many calls at once: a few cards a turn, a few more waiting in
    # a conversation, and every further call gets an error result saying why.
    max_pending_per_turn: Annotated[int, Field(ge=1, le=100)] = 3
    max_pending_per_conversation: Annotated[int, Field(ge=1, le=1000)] = 10
    # "thread": the card in the conversation; "approver": to the approvers privately, with one
    # line left in the conversation (arguments people there should not read).
    where: Literal["thread", "approver"] = "thread"

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


def needs_approval(info: Hinted, approve: Sequence[str], allow_without: Sequence[str]) -> bool:
    """Whether a call waits: unless the operator allowed it (`allow_without_approval`), when
    its server's `approve` globs match (its own name or the name the model sees), or when its
    server marks it destructive and not read-only. A server's hints can add an approval but
    never lift one the operator asked for: `readOnlyHint` does not exempt a tool the globs name
    (the server is not the operator, and it may be lying)."""
    if any(fnmatch.fnmatchcase(info.name, glob) for glob in allow_without):
        return False
    if any(
        fnmatch.fnmatchcase(info.tool, glob) or fnmatch.fnmatchcase(info.name, glob)
        for glob in approve
    ):
        return True
    return bool(info.destructive) and not info.read_only


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


class ApprovalDesk:
    """Requests, presses, expiry and continuations, over the store's approval rows; the
    `Resumer` of "approval" continuations."""

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
        shown_before = await self._book.shown(request.turn_id, spec.name, digest(text))
        if shown_before is not None:  # the turn runs again after a crash: one card, one call
            return self._waiting(spec.name, shown_before.id)
        await self._bounded(spec.name, request)
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
            request=request,
            created_at=now,
            expires_at=now + self._settings.expire_minutes * 60,
        )
        await self._book.add(approval)
        card = self._card(approval, request)
        try:
            if self._settings.where == "approver":
                where = await cards.post_private(request.route, card, approvers)
            else:
                where = await cards.post_card(request.route, card)
        except Exception as exc:  # the card could not be shown: nobody can decide, so deny now
            log.warning("approval_card_failed", approval_id=approval.id, error=type(exc).__name__)
            await self._book.decide(approval.id, DENIED, "host", self._clock())
            await self._book.finish(approval.id, "")  # its turn knows: nothing continues
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
        return self._waiting(spec.name, approval.id)

    def _card(self, approval: Approval, request: TurnRequest) -> Card:
        """The card: bounded, on one line where a person's name is, and in the two forms a
        private card needs (what stays in the conversation, and the card without arguments)."""
        tool, minutes = approval.tool, self._settings.expire_minutes
        arguments, who = shown(approval.arguments, MAX_SHOWN_ARGUMENTS), shown(_who(request), 200)
        text = replies.approval_card(tool, arguments, who, minutes)
        if self._settings.where == "approver" and request.surface is not None:
            place = one_line(request.surface.name or request.surface.id, NAME_MAX_CHARS)
            text += "\n" + replies.approval_asked_in(place)
        return Card(
            approval_id=approval.id,
            tool=tool,
            arguments=arguments,
            requester=who,
            text=text,
            approve_label=replies.APPROVE,
            deny_label=replies.DENY,
            notice=replies.approval_notice(tool, minutes),
            hidden_text=replies.approval_card_hidden(tool, who, minutes),
        )

    async def _bounded(self, tool: str, request: TurnRequest) -> None:
        """Refuse one more card past `max_pending_per_turn` cards asked for by this turn, or
        `max_pending_per_conversation` still waiting in its conversation."""
        of_turn, waiting = await self._book.counts(request.turn_id, request.conversation_key)
        per_turn = self._settings.max_pending_per_turn
        per_conversation = self._settings.max_pending_per_conversation
        if of_turn >= per_turn:
            log.warning("approval_refused_bound", tool=tool, bound="max_pending_per_turn")
            raise ToolError(replies.approval_too_many(tool, per_turn, "this turn"))
        if waiting >= per_conversation:
            log.warning("approval_refused_bound", tool=tool, bound="max_pending_per_conversation")
            raise ToolError(replies.approval_too_many(tool, per_conversation, "this conversation"))

    def _waiting(self, tool: str, approval_id: str) -> ToolOutput:
        """The call's result in the asking turn: it has not run, and the turn suspends."""
        return ToolOutput(
            replies.approval_waiting(tool, self._settings.expire_minutes),
            outcome="waiting_approval",
            facts={"approval_id": approval_id},
            suspends=Continuation(KIND, approval_id),
        )

    # --- a decision: a press, or expiry ---

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
        now = self._clock()
        if not await self._book.decide(approval_id, state, presser, now):
            current = await self._book.get(approval_id)
            return PressAnswer(
                replies.approval_already(current.state if current else state), changed=False
            )
        await self._decided(replace(approval, state=state, decided_by=presser, decided_at=now))
        return PressAnswer(replies.approval_recorded(state), changed=True)

    async def expire_due(self) -> int:
        """Deny every pending request whose time is up; how many this call expired."""
        expired = 0
        for approval in await self._book.due(self._clock()):
            now = self._clock()
            if await self._book.decide(approval.id, EXPIRED, "expiry", now):
                await self._decided(replace(approval, state=EXPIRED, decided_at=now))
                expired += 1
        return expired

    async def _decided(self, approval: Approval) -> None:
        """Close the card and submit the continuation; nothing runs now. What fails here is
        left to `recover` (the decision itself is stored)."""
        self._count(approval.state)
        log.info(
            "approval_decided", approval_id=approval.id, state=approval.state, tool=approval.tool
        )
        await self._close(approval)
        await self._continue(approval)

    async def recover(self) -> int:
        """Submit again the continuation of each decided request whose outcome is not kept yet
        (its decider may have stopped before submitting it); one already stored is recognised by
        its mark and changes nothing. A submission that is new closes the card too. How many
        this call submitted."""
        taken = 0
        for approval in await self._book.unfinished(self._clock() - RECOVER_WITHIN):
            if await self._continue(approval) is Admission.ACCEPTED:
                log.warning("approval_recovered", approval_id=approval.id, state=approval.state)
                await self._close(approval)
                taken += 1
        return taken

    async def _close(self, approval: Approval) -> None:
        """Replace the card with who decided and when (its buttons and the waiting sign gone)."""
        at = datetime.fromtimestamp(approval.decided_at or self._clock(), UTC)
        by = approval.decided_by if approval.state != EXPIRED else None
        try:
            cards = self._cards.get(approval.request.channel)
            if cards is not None and approval.card:
                await cards.close_card(
                    approval.card, replies.approval_closed(approval.tool, approval.state, by, at)
                )
        except Exception as exc:  # the card stays as it was; the decision holds
            log.warning("approval_card_update_failed", error=type(exc).__name__)

    async def _continue(self, approval: Approval) -> Admission:
        """Submit the continuation turn: the asking request with a new turn id and no words of
        its own, in the conversation's lane, stored once (its mark names the approval)."""
        admission = Admission.UNAVAILABLE
        try:
            follow = replace(
                approval.request,
                text="",
                turn_id=uuid.uuid4().hex,
                received_at=datetime.fromtimestamp(self._clock(), UTC),
                preceding=(),
                attachments=(),
                speaker=None,  # the host speaks, not the person who asked
                continues=Continuation(KIND, approval.id),
            )
            if self._sink is not None:
                marks = [f"{KIND}:{approval.id}"]
                admission = await self._sink.submit(follow, source=KIND, marks=marks)
        except Exception as exc:  # an unreadable request: logged, and left to the operator
            log.error("approval_continuation_failed", approval_id=approval.id, error=str(exc))
        if not admission.acknowledge:  # not stored: the host is closing, or the store is away
            log.warning("approval_continuation_deferred", approval_id=approval.id)
        return admission

    # --- the continuation, in its lane ---

    async def resume(self, request: TurnRequest, continuation: Continuation) -> str:
        """The `Resumer`: run an approved call (at most once) and return the note the model
        reads; for a denied or expired one, the note that it did not run."""
        approval = await self._book.get(continuation.key)
        if approval is None or approval.state == PENDING:
            log.error("approval_continuation_unknown", approval_id=continuation.key)
            return replies.APPROVAL_LOST
        at = datetime.fromtimestamp(approval.decided_at or self._clock(), UTC)
        # The note is placed as written (the host's own text), so what the model wrote is
        # neutralized here, once; the outcome is the tool's rendered result (fenced, neutralized
        # once by the tool, as in a tool round) or a host sentence.
        arguments = neutralize(scrub(approval.arguments))
        if approval.state != APPROVED:
            await self._book.finish(approval.id, "")
            return replies.approval_refused(approval.tool, arguments, approval.state, at)
        outcome = await self._outcome(approval)
        return replies.approval_ran(approval.tool, arguments, at, outcome)

    async def _outcome(self, approval: Approval) -> str:
        """The approved call's outcome: kept by an earlier run of this continuation, or the
        call's result now. It runs only after its running mark was set here, so a run that
        stopped during the call leaves a mark, and the next one says it is not known."""
        if approval.result is not None:
            return approval.result
        if digest(approval.arguments) != approval.digest:
            log.error("approval_digest_mismatch", approval_id=approval.id)
            outcome = replies.APPROVAL_TAMPERED
        elif approval.running_at is None and await self._book.start(approval.id, self._clock()):
            outcome = (await _call(self._tools(), approval))[:MAX_RESULT]
        else:
            log.warning("approval_interrupted", approval_id=approval.id)
            outcome = replies.APPROVAL_INTERRUPTED
        if await self._book.finish(approval.id, outcome):
            return outcome
        kept = await self._book.get(approval.id)  # another run kept one first: that one holds
        return kept.result if kept is not None and kept.result is not None else outcome

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


async def _call(tools: Sequence[Any], approval: Approval) -> str:
    """The approved call, exactly as stored (and shown); what it returned, or why it failed."""
    tool = next((t for t in tools if t.spec.name == approval.tool), None)
    if tool is None:
        return replies.approval_tool_gone(approval.tool)
    try:
        returned = await tool(json.loads(approval.arguments))
    except ToolError as exc:
        return str(exc)
    except Exception as exc:  # a tool bug becomes the outcome the model reads
        return f"the tool failed: {type(exc).__name__}"
    log.info("approval_ran", approval_id=approval.id, tool=approval.tool)
    return returned.text if isinstance(returned, ToolOutput) else str(returned)


def _who(request: TurnRequest) -> str:
    """The requester on one line, bounded (a display name's line breaks could forge a line of
    the card, such as a decision); the channel escapes it for its platform."""
    speaker = request.speaker
    if speaker is None:
        return "someone"
    return person_label(speaker.name, speaker.handle) or "someone"


def _valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None
