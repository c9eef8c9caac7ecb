"""The model turn, the last handler: recall, attachments, tools and the prompt, then the model
call (which a person may stop), and what it ended with as a conclusion (answered, suspended on
an approval, or failed with a continuity account)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import structlog

from bot import replies, tracing
from bot.errors import BreakerTripped, TurnFailed, WindowExceeded
from bot.host import leftout
from bot.host.answering import Answering
from bot.host.conclusions import (
    Conclusion,
    budget_details,
    noted,
    suspended_details,
    tool_details,
)
from bot.host.continuity import MODEL_FAILED, TIMED_OUT, continuity_account
from bot.host.inputs import HostStores, Thinking, TurnRules
from bot.host.pipeline import Stops, Turn
from bot.host.publisher import Publisher
from bot.host.redaction import without_secrets
from bot.host.streaming import AnswerStream
from bot.memory.recall import RecallCache, request_holds, without_recalled_words
from bot.ports.model import LeftOut, Steering, TurnOutcome, TurnPlan
from bot.ports.outbox import InboxState
from bot.ports.records import Usage
from bot.prompt import SILENT_TOKEN, speaker_label
from bot.prompt.ageing import ResultFetch, has_aged
from bot.turnprep import memory_scope, surface_prompt
from bot.turns import (
    Attached,
    ConversationKind,
    HistoryEntry,
    Outcome,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Prepared:
    plan: TurnPlan
    user_entry: HistoryEntry
    notice: Sequence[str]  # lines about files that were not read, said ahead of the answer


class ModelTurn:
    """Recall, prepare the prompt once, then call the model and conclude with what it said."""

    def __init__(
        self,
        thinking: Thinking,
        stores: HostStores,
        rules: TurnRules,
        publisher: Publisher,
        answering: Answering,
        stops: Stops,
        model_calls: asyncio.Semaphore,
        steering: Callable[[Turn], Steering | None] = lambda turn: None,
    ) -> None:
        """`steering`: where a turn's model rounds get the messages sent meanwhile (SPEC §19)."""
        self._thinking = thinking
        self._history = stores.history
        self._memory = stores.memory
        self._attachments = stores.attachments
        self._budgets = rules.budgets
        self._caps = rules.caps
        self._publisher = publisher
        self._answering = answering
        self._stops = stops
        self._model_calls = model_calls
        self._steering = steering

    async def __call__(self, turn: Turn) -> Conclusion:
        turn.request = without_secrets(turn.request)  # one stored before this rule, too
        request = turn.request
        prepared = await self._prepare(turn)
        _log_context(request)
        stream = self._answering.stream(turn.job, request)
        heard = _Heard(stream.on_text if stream is not None else None)
        plan = replace(
            prepared.plan,
            on_text=heard.on_text if heard.streams else None,  # None: the call need not stream
            breakers=await self._caps.breakers(request, self._budgets, turn.started),
            steering=self._steering(turn),
        )
        # The progress sign (reaction, typing) stays up until the answer shows: posted, or its
        # stream opened (the deliverer takes the sign down then).
        await turn.keep.enter_async_context(self._answering.working(request.route))
        charged: list[Usage] = []  # what calls that ended without an answer may have cost
        plan = replace(plan, on_charge=charged.append, on_tool=_heard_tools(turn, stream))
        opened: Mapping[int, str] = {}  # the messages the stream opened: delivery finishes them
        try:
            with self._stops.stoppable(request):  # also while it waits for a model call slot
                async with self._model_calls:
                    try:
                        outcome = await self._thinking.model.run(plan)
                    finally:  # what the stream showed is finished by delivery, after publication
                        if stream is not None:
                            opened = await stream.close()
        except WindowExceeded as exc:  # the floors alone do not fit the window: unmet
            details = {"floor_unmet": True}
            record = turn.record(Outcome.REFUSED, error=exc.code, details=details)
            return Conclusion(record, InboxState.REFUSED, replies.TOO_LARGE, opened=opened)
        except BreakerTripped as stopped:
            record = turn.record(
                Outcome.STOPPED,
                error=f"{stopped.code}: {stopped}",
                request_body=stopped.spend.request,
                usage=stopped.spend.usage,
                attempts=stopped.spend.attempts,
                details=budget_details(stopped.spend.budget)
                | tool_details(stopped.spend.tool_calls),
            )
            reason = f"a cost breaker stopped it ({stopped.code})"
            added = turn.job.absorbed.entries
            account = continuity_account(
                prepared.user_entry, stopped.partial_text, reason, turn.ran, added
            )
            say = noted(prepared.notice, stopped.reply or replies.TURN_FAILED)
            return Conclusion(record, InboxState.FAILED, say, entries=account, opened=opened)
        except TurnFailed as failure:
            record = turn.record(
                Outcome.FAILED,
                error=str(failure),
                request_body=failure.spend.request,
                usage=failure.spend.usage,
                attempts=failure.spend.attempts,
                details=budget_details(failure.spend.budget)
                | tool_details(failure.spend.tool_calls),
            )
            user_entry, notice = await self._left_out(prepared, failure.spend.left_out)
            reason = TIMED_OUT if failure.timed_out else MODEL_FAILED
            added = turn.job.absorbed.entries
            account = continuity_account(user_entry, failure.partial_text, reason, turn.ran, added)
            say = noted(notice, failure.reply or replies.TURN_FAILED)
            return Conclusion(record, InboxState.FAILED, say, entries=account, opened=opened)
        except asyncio.CancelledError:
            cut = self._publisher.cut_short(
                turn.job,
                request,
                prepared.user_entry,
                turn.started,
                heard.text,
                sum(charged, Usage()),
                opened,
                stopped=self._stops.stopped(request.turn_id),
                ran=turn.ran,
            )
            await asyncio.shield(cut)
            raise
        user_entry, notice = await self._left_out(prepared, outcome.left_out)
        return self._answered(turn, outcome, user_entry, notice, opened)

    async def _prepare(self, turn: Turn) -> _Prepared:
        request = turn.request
        mind = self._thinking.mind(turn.agent)
        assembler = mind.assembler
        with tracing.span("recall") as recalled:
            history = await self._history.load(request.conversation_key)
            attached = await self._attached(request, history)
            recall = RecallCache(
                self._memory,
                memory_scope(request),
                request_holds(request, history),
                render=assembler.recalled_block,
            )
            words = assembler.words(request)
            hits = await recall.recall(words) if self._memory is not None else []
            offered = mind.tools_for(request, recall, turn.policy.rule)
            tools = [tool for tool in offered if turn.agent.allows(tool.spec.name)]
            if has_aged(history):  # results replayed as references can be read again
                tools = [*tools, ResultFetch(history)]
            surface = surface_prompt(turn.policy)
            surface = replace(surface, tools=tuple(tool.spec for tool in tools))
            prepared = assembler.prepare(request, history, hits, surface=surface, attached=attached)
            recalled.set(bot__history_entries=len(history), bot__memory_hits=len(hits))
        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            prompt=prepared.prompt,
            builder=assembler,
            tools=tools,
        )
        return _Prepared(plan, prepared.user_entry, attached.problems)

    async def _attached(self, request: TurnRequest, history: Sequence[HistoryEntry]) -> Attached:
        """This turn's attachments, read; a file that was not read is told to the person, one
        line each, ahead of the answer (the rest of the message is still answered)."""
        if self._attachments is None:
            return Attached()
        return await self._attachments.take(request, history)

    async def _left_out(
        self, prepared: _Prepared, left_out: Sequence[LeftOut]
    ) -> tuple[HistoryEntry, Sequence[str]]:
        """Attachment content the model calls went without: a line for the person about each
        file, and content the API refused kept out of this conversation's replays for good."""
        user_entry, notice = prepared.user_entry, prepared.notice
        if not left_out:
            return user_entry, notice
        refused = leftout.refused_ids(left_out)
        if refused and self._attachments is not None:
            await self._attachments.forget(prepared.plan.conversation_key, refused)
        lines = leftout.notice_lines(left_out, user_entry, prepared.plan.history)
        return leftout.marked(user_entry, refused), [*notice, *lines]

    def _answered(
        self,
        turn: Turn,
        outcome: TurnOutcome,
        user_entry: HistoryEntry,
        notice: Sequence[str],
        opened: Mapping[int, str],
    ) -> Conclusion:
        """The model's answer (nothing, for a silent request-driven turn) and the exchange to
        remember. A turn whose tool calls wait on something (an approval) is answered all the
        same and suspends: it continues later as a continuation turn."""
        request = turn.request
        priced = self._thinking.mind(turn.agent).assembler.priced
        entries = [user_entry, *map(priced, without_recalled_words(outcome.entries))]
        if outcome.history is not None:
            entries = [*map(priced, outcome.history), *entries]
        silent = request.kind is ConversationKind.REQUEST and outcome.text.strip() == SILENT_TOKEN
        ended = Outcome.SILENT if silent else Outcome.OK
        details = budget_details(outcome.budget) | tool_details(outcome.tool_calls)
        if turn.job.absorbed.items:  # messages sent meanwhile that it took in (SPEC §19)
            details["took_in"] = len(turn.job.absorbed.items)
        if outcome.suspended and not silent:  # it waits (an approval): its continuation follows
            ended = Outcome.SUSPENDED
            details |= suspended_details(outcome.suspended)
        record = turn.record(
            ended,
            request_body=outcome.request,
            usage=outcome.usage,
            attempts=outcome.attempts,
            details=details,
        )
        return Conclusion(
            record,
            InboxState.SILENT if silent else InboxState.ANSWERED,
            "" if silent else noted(notice, outcome.text),
            answer=True,
            entries=entries,
            replaces=outcome.history is not None,
            capture=self._publisher.capture(request, user_entry, outcome.text),
            text=outcome.text,
            opened=opened,
        )


class _Heard:
    """The text the model has streamed so far in this turn (what a stopped turn's continuity
    account keeps), passed on to the turn's live preview."""

    def __init__(self, then: Callable[[str], Awaitable[None]] | None) -> None:
        self._then = then
        self._deltas: list[str] = []

    @property
    def streams(self) -> bool:
        return self._then is not None

    @property
    def text(self) -> str:
        return "".join(self._deltas)

    async def on_text(self, delta: str) -> None:
        self._deltas.append(delta)
        if self._then is not None:
            await self._then(delta)


def _heard_tools(
    turn: Turn, stream: AnswerStream | None
) -> Callable[[ToolUseBlock | ToolResultBlock], None]:
    """Each tool call and result: kept for a continuity account, and shown as a step where the
    answer streams."""
    if stream is None:
        return turn.ran.note

    def heard(block: ToolUseBlock | ToolResultBlock) -> None:
        turn.ran.note(block)
        stream.on_tool(block)

    return heard


def _log_context(request: TurnRequest) -> None:
    log.info(
        "turn_context",
        turn_id=request.turn_id,
        conversation_key=request.conversation_key,
        speaker=speaker_label(request.speaker) if request.speaker else None,
        preceding=len(request.preceding),
        preceding_bytes=sum(len(m.text.encode()) for m in request.preceding),
    )
