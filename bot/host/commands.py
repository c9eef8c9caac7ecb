"""The turn handlers the host answers itself, with no model call: /memory and /forget, /usage,
/schedules, /start and /help, /compact, and a `/name` that names no skill."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bot import replies
from bot.errors import TurnFailed, UnknownSkill
from bot.host import memory_commands, schedule_commands
from bot.host.answering import Answering
from bot.host.conclusions import Conclusion
from bot.host.inputs import Thinking
from bot.host.pipeline import Turn
from bot.policy.budget import Budgets
from bot.ports.cron import ChatSchedules
from bot.ports.history import HistoryStore
from bot.ports.memory import MemoryStore
from bot.ports.model import TurnPlan
from bot.ports.outbox import InboxState
from bot.prompt import host_command
from bot.turnprep import memory_scope, surface_prompt
from bot.turns import ConversationKind, Outcome, SurfaceKind, TurnRequest


def first_word(text: str) -> str:
    words = text.split(maxsplit=1)
    return words[0].lower() if words else ""


async def usage_reply(budgets: Budgets | None, request: TurnRequest) -> str:
    """The person's own spending against their budget (at a terminal, where nobody is known by
    name: what this conversation used)."""
    person = request.person
    if budgets is not None and request.kind is ConversationKind.CONSOLE:
        here = await budgets.spent_here(request, datetime.now(UTC))
        return replies.console_usage(here.tokens, here.cost_usd)
    if person is None or budgets is None:
        return replies.USAGE_UNKNOWN
    mine = await budgets.personal(person, datetime.now(UTC))
    spent = mine.spent
    return replies.usage_report(
        spent.tokens, spent.cost_usd, mine.token_limit, mine.usd_limit, mine.resets_at
    )


class MemoryCommands:
    """/memory or /forget: answered from the speaker's own memory, at no token cost, and never
    refused for budget."""

    def __init__(self, memory: MemoryStore | None) -> None:
        self._memory = memory

    async def __call__(self, turn: Turn) -> Conclusion | None:
        request = turn.request
        if not memory_commands.is_memory_command(request.text):
            return None
        scope = memory_scope(request)
        console = request.kind is ConversationKind.CONSOLE
        reply = await memory_commands.answer(
            request.text, request.person, scope, self._memory, console=console
        )
        details = {"command": "memory"}
        return turn.answered_by_host(
            Outcome.OK, InboxState.ANSWERED, reply, details=details, private=True
        )


class UsageCommand:
    """/usage: said only where nobody else reads it (a direct message, the terminal, a message
    only its person sees)."""

    def __init__(self, budgets: Budgets | None) -> None:
        self._budgets = budgets

    async def __call__(self, turn: Turn) -> Conclusion | None:
        request = turn.request
        if first_word(request.text) != "/usage":
            return None
        private = request.kind is ConversationKind.CONSOLE or (
            request.surface is not None and request.surface.kind is SurfaceKind.DM
        )
        # Elsewhere it is said to the person alone where the platform can (a Telegram group's
        # message for one member), else they are asked to ask in private.
        say = await usage_reply(self._budgets, request)
        public = None if private else replies.USAGE_PRIVATE
        details = {"command": "usage"}
        return turn.answered_by_host(
            Outcome.COMMAND,
            InboxState.REFUSED,
            say,
            details=details,
            private=not private,
            public=public,
        )


class SchedulesCommand:
    """/schedules: the jobs set up in chat here, answered at no token cost."""

    def __init__(self, schedules: ChatSchedules, operators: frozenset[str]) -> None:
        self._schedules = schedules
        self._operators = operators

    async def __call__(self, turn: Turn) -> Conclusion | None:
        request = turn.request
        if not schedule_commands.is_schedules_command(request.text):
            return None
        reply = await schedule_commands.answer(
            request.text, request, self._schedules, self._operators
        )
        details = {"command": "schedules"}
        return turn.answered_by_host(Outcome.COMMAND, InboxState.ANSWERED, reply, details=details)


class HostCommands:
    """/start and /help, answered by the host; /compact, which compacts the history with one
    model call and says so."""

    def __init__(
        self,
        thinking: Thinking,
        history: HistoryStore,
        answering: Answering,
        model_calls: asyncio.Semaphore,
        *,
        schedules: bool,
    ) -> None:
        self._thinking = thinking
        self._history = history
        self._answering = answering
        self._model_calls = model_calls
        self._schedules = schedules

    async def __call__(self, turn: Turn) -> Conclusion | None:
        command = host_command(turn.request.text)
        if command is None:
            return None
        if command == "compact":
            await turn.keep.enter_async_context(self._answering.working(turn.request.route))
            return await self._compact(turn)
        agent = self._thinking.mind(turn.agent).assembler.agent
        listed = [(skill.name, skill.description) for skill in agent.skills]
        say = (
            replies.greeting(agent.identity)
            if command == "start"
            else replies.help_text(listed, schedules=self._schedules)
        )
        return turn.answered_by_host(Outcome.COMMAND, InboxState.REFUSED, say)

    async def _compact(self, turn: Turn) -> Conclusion:
        request = turn.request
        history = await self._history.load(request.conversation_key)
        if not history:
            say = replies.NOTHING_TO_COMPACT
            return turn.answered_by_host(Outcome.COMPACTED, InboxState.ANSWERED, say)
        surface = surface_prompt(turn.policy)
        assembler = self._thinking.mind(turn.agent).assembler
        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            prompt=assembler.prepare(request, history, surface=surface).prompt,
            builder=assembler,
            compact_only=True,
            compact_focus=_after_command(request.text),
        )
        try:
            async with self._model_calls:
                outcome = await self._thinking.model.run(plan)
        except TurnFailed as failure:
            say = failure.reply or replies.TURN_FAILED
            return turn.answered_by_host(Outcome.FAILED, InboxState.FAILED, say, error=str(failure))
        say = outcome.text
        if request.attachments:  # not read, not kept: said, never dropped silently
            say += "\n\n" + replies.compact_left_files(len(request.attachments))
        return Conclusion(
            turn.record(Outcome.COMPACTED, usage=outcome.usage),
            InboxState.ANSWERED,
            say,
            answer=True,
            entries=outcome.history or (),
            replaces=outcome.history is not None,
        )


def _after_command(text: str) -> str:
    """What follows the command word: `/compact focus on the open tickets` -> its instructions."""
    parts = text.strip().split(None, 1)
    return parts[1].strip() if len(parts) > 1 else ""


class NoSuchSkill:
    """A `/name` that names no skill: the person is told which there are."""

    def __init__(self, thinking: Thinking) -> None:
        self._thinking = thinking

    async def __call__(self, turn: Turn) -> Conclusion | None:
        try:
            self._thinking.mind(turn.agent).assembler.words(turn.request)
        except UnknownSkill as exc:
            return turn.answered_by_host(
                Outcome.REFUSED, InboxState.REFUSED, str(exc), error="unknown_skill"
            )
        return None


async def beside(
    request: TurnRequest,
    memory: MemoryStore | None,
    budgets: Budgets | None,
    schedules: ChatSchedules | None,
    operators: frozenset[str],
) -> str:
    """The private reply to a host command sent beside the conversation (Slack's slash
    commands): `/memory`, `/forget N|all`, `/usage` or `/schedules [remove ID]`, from the
    person's own data (and the place's schedules)."""
    if memory_commands.is_memory_command(request.text):
        scope = memory_scope(request)
        return await memory_commands.answer(request.text, request.person, scope, memory)
    if first_word(request.text) == "/usage":
        return await usage_reply(budgets, request)
    if schedule_commands.is_schedules_command(request.text):
        if schedules is None:
            return replies.SCHEDULES_OFF
        return await schedule_commands.answer(request.text, request, schedules, operators)
    return replies.COMMAND_UNKNOWN
