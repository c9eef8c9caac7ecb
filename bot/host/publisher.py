"""Ending turns: one publication per conclusion (history, parts, item state, record, usage charge,
memory capture), tried again while the host runs, then delivery and the turn's observers.

The charge is published with the turn, before delivery (which may wait on a rate-limited
platform): the calls are billed already, and a budget must see them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

import structlog

from bot.errors import ClaimLost, DuplicateKey
from bot.host.answering import Answering
from bot.host.conclusions import BY_NEWER_MESSAGE, STOPPED, Conclusion, policy_of, record
from bot.host.continuity import CANCELLED, ToolsRan, continuity_account
from bot.host.job import Job
from bot.policy.budget import Budgets
from bot.policy.surfaces import Policies
from bot.ports.intake import TurnResult
from bot.ports.memory import MemoryCapture
from bot.ports.outbox import InboxState, Outbox, Publication
from bot.ports.records import TurnRecord, Usage
from bot.replies import INTERRUPTED_NOTE, STOPPED_NOTE
from bot.replies import stopped as stopped_note
from bot.turnprep import memory_scope
from bot.turns import ConversationKind, HistoryEntry, Origin, Outcome, TurnRequest

log = structlog.get_logger(__name__)

# A publication the store refuses (disk full, database locked) is tried again while the host runs,
# waiting this long first and twice as long each time, up to the cap; its lane waits meanwhile.
PUBLISH_RETRY_FIRST = 0.1
PUBLISH_RETRY_MAX = 30.0


class Publisher:
    """Publishes and delivers what ends each turn; tells the observers of its record."""

    def __init__(
        self,
        outbox: Outbox,
        answering: Answering,
        *,
        policies: Policies | None,
        budgets: Budgets | None,
        memory_on: bool,
        closing: asyncio.Event,
    ) -> None:
        self._outbox = outbox
        self._answering = answering
        self._policies = policies
        self._budgets = budgets
        self._memory_on = memory_on
        self._closing = closing  # set when the host begins closing: publishing stops retrying
        self.observers: list[Callable[[TurnRecord], None]] = []

    def record(
        self,
        request: TurnRequest,
        started: datetime,
        outcome: Outcome,
        *,
        error: str | None = None,
        usage: Usage | None = None,
    ) -> TurnRecord:
        """The record of a turn the host ended itself (refused, crashed, cut short)."""
        policy = policy_of(self._policies, request)
        return record(request, started, outcome, policy, error=error, usage=usage)

    async def conclude(self, job: Job, conclusion: Conclusion) -> TurnResult:
        """End the turn: publish history, the parts of what is said, the item's terminal state,
        the turn record, its usage charge and its memory capture in one transaction, then
        deliver. Request-driven turns are never told a host-written notice."""
        request = job.request
        assert request is not None
        record = conclusion.record
        say = conclusion.say
        if not conclusion.answer and request.kind is ConversationKind.REQUEST:
            say = ""
        if conclusion.private:  # for its person alone: where that cannot be, the open version
            hidden = self._answering.privately(request, conclusion.public)
            if hidden is not None:
                request = hidden
            elif conclusion.public is not None:
                say = conclusion.public
        parts = await self._answering.parts(job, request, say, conclusion.opened)
        publication = Publication(
            request.conversation_key,
            conclusion.entries,
            conclusion.replaces,
            parts,
            job.item_id,
            conclusion.state,
            record,
            usage=self._budgets.entry(request, record) if self._budgets is not None else None,
            capture=conclusion.capture,
            consumed=tuple(job.absorbed.items),
        )
        failure = await self._publish(publication)
        if failure is not None:  # the item stays pending: it runs again after the next start
            await self.charge(request, record)  # what this run's calls cost counts all the same
            result = TurnResult(request.turn_id, Outcome.FAILED, error=f"publish: {failure}")
        else:
            delivery = await self._answering.send(job, request, parts)
            if delivery is not None:  # the stored record was written before; observers see it
                details = {**record.details, "delivered": delivery.delivered}
                record = replace(record, details=details)
            self.observe(record)
            outcome = Outcome.OK if record.outcome == Outcome.COMPACTED else record.outcome
            result = TurnResult(request.turn_id, outcome, say, delivery, record.error)
        if conclusion.text is not None:
            result = replace(result, text=conclusion.text)
        if conclusion.error is not None:
            result = replace(result, error=conclusion.error)
        return result

    async def cut_short(
        self,
        job: Job,
        request: TurnRequest,
        user_entry: HistoryEntry,
        started: datetime,
        partial: str,
        usage: Usage,
        opened: Mapping[int, str],
        *,
        stopped: str | None,
        ran: ToolsRan | None = None,
    ) -> None:
        """A turn cut short. At shutdown past its grace, an inbox item stays pending and runs
        again after the next start, exactly as after a kill: nothing is published now, so the
        person gets one answer and history holds the turn once, with no continuity account
        beside it. A turn that will not run again (a person stopped it; console, cron) records
        that it did not complete, with what it had written and the tool calls that ran (`ran`),
        so the next turn is not left guessing; a stopped turn's item ends there and its
        answer's place says it was stopped (`stopped`: why; None when no person did).
        Either way what its calls cost (`usage`) is charged: the API bills a call cut short."""
        added = job.absorbed.entries
        if stopped is not None:
            ended = self.record(request, started, Outcome.CANCELLED, error=STOPPED, usage=usage)
            account = continuity_account(user_entry, partial, stopped, ran, added)
            note = INTERRUPTED_NOTE if stopped == BY_NEWER_MESSAGE else STOPPED_NOTE
            say = stopped_note(partial, note)
            stop = Conclusion(ended, InboxState.STOPPED, say, entries=account, opened=opened)
            await self.conclude(job, stop)
            return
        ended = self.record(request, started, Outcome.CANCELLED, usage=usage)
        self.observe(ended)
        await self.charge(request, ended)  # the API bills a call cut short all the same
        if job.item_id is not None:
            log.info("turn_left_pending", reason="cancelled at shutdown")
            return
        account = continuity_account(user_entry, partial, CANCELLED, ran, added)
        try:
            await self._outbox.publish(Publication(request.conversation_key, account, record=ended))
        except Exception:
            log.exception("continuity_publish_failed", conversation_key=request.conversation_key)

    def capture(
        self, request: TurnRequest, user_entry: HistoryEntry, answer: str
    ) -> MemoryCapture | None:
        """What long-term memory captures of an answered turn (with its publication). Nothing of
        a continuation: its text is a host note with a tool's result, not what a person said."""
        if not self._memory_on or not answer.strip() or request.continues is not None:
            return None
        return MemoryCapture(
            conversation_key=request.conversation_key,
            surface=memory_scope(request).surface,
            person=request.person,
            speaker_label=user_entry.speaker,
            user_text=user_entry.text,
            answer=answer,
            at=request.received_at,
            turn_id=request.turn_id,
            origin=origin_of(request),
        )

    def observe(self, record: TurnRecord) -> None:
        for observer in self.observers:
            observer(record)
        latency_ms = (record.finished_at - record.started_at).total_seconds() * 1000
        log.info(
            "turn_finished",
            turn_id=record.turn_id,
            conversation_key=record.conversation_key,
            outcome=record.outcome,
            latency_ms=round(latency_ms, 1),
            attempts=record.attempts,
            input_tokens=record.usage.input_tokens,
            cache_read_tokens=record.usage.cache_read_tokens,
            cache_write_tokens=record.usage.cache_write_tokens,
            output_tokens=record.usage.output_tokens,
        )

    async def charge(self, request: TurnRequest, record: TurnRecord) -> None:
        """Count what a turn's calls cost when no publication carries it (one that could not be
        published, a turn cut short at shutdown): the API bills them all the same."""
        if self._budgets is None:
            return
        try:
            await self._budgets.charge(request, record)
        except Exception:
            log.exception("usage_charge_failed", turn_id=request.turn_id)

    async def _publish(self, publication: Publication) -> str | None:
        """Publish, trying again with backoff while the host runs (a full disk may get space
        back; the conversation's later turns wait behind this one, so order holds). None once
        published; the error's name when the host began closing first, or when trying again
        cannot help (another replica runs the item; the turn was published before)."""
        wait = PUBLISH_RETRY_FIRST
        while True:
            try:
                await self._outbox.publish(publication)
                return None
            except ClaimLost:  # another replica took this one for gone and runs the item
                log.warning("turn_claim_lost", item=publication.item_id)
                return ClaimLost.__name__
            except DuplicateKey as exc:  # published before (a turn run twice): never will be
                log.error("turn_published_twice", item=publication.item_id, detail=str(exc))
                return DuplicateKey.__name__
            except Exception as exc:
                error = type(exc).__name__
                if self._closing.is_set():
                    log.warning("turn_publish_failed", error=error, detail=str(exc))
                    return error
                log.warning("turn_publish_retrying", error=error, detail=str(exc), wait=wait)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), wait)
            wait = min(wait * 2, PUBLISH_RETRY_MAX)


def origin_of(request: TurnRequest) -> Origin:
    """Where a captured turn's words came from, from what the host knows of the request alone
    (never from the words, so nothing a person, a tool or a file writes can raise it)."""
    if request.kind is ConversationKind.REQUEST:
        return Origin.SCHEDULED
    if request.kind is ConversationKind.CONSOLE:
        return Origin.OPERATOR
    return request.origin or Origin.UNLISTED
