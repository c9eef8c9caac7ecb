"""The assembler: one turn's provider-neutral request (`bot.ports.request`) from the agent's
texts, the session, the history, the current message and recalled memory, with its cache
positions and the token budget; `bot.model` encodes it for a wire.

Layout (SPEC §3): the system sections are the guardrails, the identity, the skill index, the
selected skill bodies (these four are agent-wide: the same bytes for every conversation) and the
session block (the same bytes for every turn of one conversation). History follows as structured
messages, then the current user message. Cache positions sit at the end of the agent-wide part,
the end of the session block and the end of the history, so a new conversation reads the
agent-wide prefix from cache and each turn re-reads the previous turn's.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.errors import WindowExceeded
from bot.ports.memory import MemoryHit
from bot.ports.model import DEFAULT_SURFACE, AssembledRequest, SurfacePrompt, TurnPrompt
from bot.ports.request import CacheTtl, Message, ModelRequest, Part, Section, Text, ToolDef
from bot.ports.tools import ToolSpec
from bot.prompt import history as hist
from bot.prompt.attachments import attachment_tokens, content_blocks
from bot.prompt.message import (
    memory_block,
    person_text,
    preceding_fence,
    skill_block,
    speaker_label,
    speaker_tag,
    turn_context,
)
from bot.prompt.session import session_block
from bot.prompt.skills import (
    LOAD_SKILL_TOOL,
    AgentTexts,
    Skill,
    find_skill,
    render_index,
    render_selected,
    split_skill_command,
)
from bot.prompt.template import DEFAULT_SESSION_TEMPLATE, DEFAULT_TURN_TEMPLATE, Template
from bot.prompt.tokens import TokenCounter
from bot.turns import Attached, Block, HistoryEntry, TextBlock, TurnRequest

# Floors above this share of the input budget leave history too little room to be useful (it is
# also where the host starts compacting), so the turn record flags them as `floor_unmet`.
FLOOR_SHARE = 0.85
# Pace rule: a conversation whose recent user turns usually come further apart than this misses a
# 5-minute cache on every turn, so it is worth paying for the 1-hour lifetime.
SLOW_PACE_SECONDS = 270.0
PACE_SAMPLE = 5
_SESSION_CACHE_SIZE = 256
INSTRUCTIONS_HEADING = "# Instructions for this place"


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """The request's default model, its answer limit and the context window they share."""

    model: str
    max_tokens: int
    context_window: int
    thinking_budget: int = 0  # extended thinking's tokens, on top of max_tokens (0: none)


@dataclass(frozen=True, slots=True)
class Templates:
    """The session block's and the turn context's templates (an agent may override either)."""

    session: Template = DEFAULT_SESSION_TEMPLATE
    turn: Template = DEFAULT_TURN_TEMPLATE


DEFAULT_TEMPLATES = Templates()


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    """One turn's prompt, prepared once: the user entry to store, and what its request is built
    from over any history (`Assembler.build`; the model runtime builds it again after
    compacting). Everything per turn (skill command, attachments, recalled memory, surface,
    cache lifetime) is fixed inside."""

    user_entry: HistoryEntry
    prompt: TurnPrompt


class Assembler:
    """Builds each turn's request for one agent. Pure: no I/O, same input, same bytes."""

    def __init__(
        self,
        agent: AgentTexts,
        limits: ModelLimits,
        *,
        timezone: str,
        counter: TokenCounter,
        tools: Sequence[ToolSpec] = (),
        memory_enabled: bool = True,
        skill_max_bytes: int = 48_000,
        templates: Templates = DEFAULT_TEMPLATES,
    ) -> None:
        model, max_tokens, context_window = limits.model, limits.max_tokens, limits.context_window
        if max_tokens >= context_window:
            raise ValueError(
                f"model.max_tokens ({max_tokens}) leaves no room for input in a context window of "
                f"{context_window} tokens. Fix: lower model.max_tokens or raise "
                "model.context_window."
            )
        self._agent = agent
        self._model = model
        self._max_tokens = max_tokens
        self._thinking = limits.thinking_budget
        self._window = context_window
        self._session_template = templates.session
        self._turn_template = templates.turn
        self._zone = ZoneInfo(timezone)
        self._zone_name = timezone
        self._counter = counter
        self._memory_enabled = memory_enabled
        self._skill_max_bytes = skill_max_bytes
        self._agent_blocks = self._agent_wide_texts()
        # For a surface whose tools leave out `load_skill`: the index does not offer it.
        self._agent_blocks_unloadable = self._agent_wide_texts(loadable=False)
        self._tools = tuple(map(_tool, tools))
        fixed = [*self._agent_blocks, _tool_text(self._tools) if tools else ""]
        self._fixed_tokens = sum(counter.count(text) for text in fixed)
        self._session_tokens: OrderedDict[str, int] = OrderedDict()

    # --- the agent-wide part --------------------------------------------------------------------

    def _agent_wide_texts(self, *, loadable: bool = True) -> list[str]:
        selected = [
            s for name in self._agent.selected if (s := find_skill(self._agent.skills, name))
        ]
        chosen = {s.name for s in selected}
        indexed = [s for s in self._agent.skills if s.name not in chosen]
        texts = [
            self._agent.guardrails.strip(),
            self._agent.identity.strip(),
            render_index(indexed, loadable=loadable),
            render_selected(selected, self._skill_max_bytes),
        ]
        return [text for text in texts if text]

    # --- per turn -------------------------------------------------------------------------------

    @property
    def agent(self) -> AgentTexts:
        return self._agent

    @property
    def fixed_tokens(self) -> int:
        """Estimated tokens of the agent-wide part (and tool definitions): on every request."""
        return self._fixed_tokens

    @property
    def input_budget(self) -> int:
        """The context window minus the default answer's max_tokens (a surface may set its own)."""
        return self._window - self._max_tokens

    def split_skill_command(self, text: str) -> tuple[tuple[Skill, ...], str]:
        return split_skill_command(self._agent.skills, text)

    def words(self, request: TurnRequest) -> str:
        """The person's words this turn: the text after a leading `/skill` command (what recall
        searches for). Raises UnknownSkill when the command names no skill."""
        return self.split_skill_command(request.text)[1]

    def prepare(
        self,
        request: TurnRequest,
        history: Sequence[HistoryEntry],
        hits: Sequence[MemoryHit] = (),
        *,
        surface: SurfacePrompt = DEFAULT_SURFACE,
        attached: Attached | None = None,
    ) -> PreparedTurn:
        """The one entry point for a turn: what it stores and how its request is built. Raises
        UnknownSkill for a `/name` that names no skill."""
        skills, text = self.split_skill_command(request.text)
        prompt = TurnPrompt(
            request=request,
            text=text,
            skills=tuple(skill.name for skill in skills),
            memory=tuple(hits),
            cache_ttl=self.cache_ttl_for(history, request.received_at),
            surface=surface,
            attached=attached,
        )
        return PreparedTurn(self.user_entry(replace(request, text=text), attached), prompt)

    def build(self, prompt: TurnPrompt, history: Sequence[HistoryEntry], /) -> AssembledRequest:
        """The request for a prepared turn over `history` (the `PromptBuilder` port)."""
        known = self._agent.skills
        skills = [skill for name in prompt.skills if (skill := find_skill(known, name))]
        return self.assemble(
            prompt.request,
            history,
            prompt.memory,
            turn_skills=skills,
            cache_ttl=prompt.cache_ttl,
            text=prompt.text,
            surface=prompt.surface,
            attached=prompt.attached,
        )

    def recalled_block(self, hits: Sequence[MemoryHit]) -> str:
        """Recalled memory as the model reads it, fenced and neutralized (automatic recall and
        the memory_recall tool's result alike)."""
        return memory_block(hits, self._zone)

    def user_entry(self, request: TurnRequest, attached: Attached | None = None) -> HistoryEntry:
        """This turn's user message as it is stored: the person's words and their attachments
        (by content id), never the fences."""
        label = speaker_label(request.speaker) if request.speaker is not None else None
        files = attached.blocks if attached is not None else ()
        note = request.continues is not None  # the host's note of what a suspension came to
        said = person_text(request.text, files, host=note)
        rendered = said if label is None else f"{speaker_tag(label)}\n{said}"
        blocks: tuple[Block, ...] = (TextBlock(request.text), *files)
        return HistoryEntry(
            role="user",
            blocks=blocks,
            speaker=label,
            tokens=self._counter.count(rendered) + sum(map(attachment_tokens, files)),
            at=request.received_at,
            host_note=note,
        )

    def priced(self, entry: HistoryEntry) -> HistoryEntry:
        """`entry` with its token estimate, so it is stored with it and never counted again
        when later turns trim the history (the model's entries come without one)."""
        if entry.tokens > 0:
            return entry
        return replace(entry, tokens=hist.entry_tokens(entry, self._counter.count))

    def assemble(
        self,
        request: TurnRequest,
        history: Sequence[HistoryEntry],
        memory: Sequence[MemoryHit] = (),
        *,
        turn_skills: Sequence[Skill] = (),
        cache_ttl: CacheTtl = "5m",
        text: str | None = None,
        surface: SurfacePrompt = DEFAULT_SURFACE,
        attached: Attached | None = None,
    ) -> AssembledRequest:
        files = attached or Attached()
        session = self.session(request, surface)
        current = self._current_message(request, memory, turn_skills, text, files)
        thinking = self._thinking if surface.thinking_budget is None else surface.thinking_budget
        max_tokens = (surface.max_tokens or self._max_tokens) + thinking  # thinking counts in it
        window = surface.models[0].context_window if surface.models else self._window
        budget = window - max_tokens
        floors = (
            self._fixed_tokens
            + self._count_session(session)
            + sum(self._counter.count(p.text) for p in current if isinstance(p, Text))
            + sum(map(attachment_tokens, files.blocks))
        )
        if floors > budget:
            raise WindowExceeded(floors, budget)
        costs = [hist.entry_tokens(entry, self._counter.count) for entry in history]
        start = hist.trim(history, costs, budget - floors)
        kept = history[start:]
        messages = hist.render(kept, files.contents)
        if messages:  # each turn re-reads the previous one's prefix
            messages[-1] = replace(messages[-1], cache=cache_ttl)
        messages.append(Message("user", tuple(current)))
        tools = self._tools if surface.tools is None else tuple(map(_tool, surface.tools))
        return AssembledRequest(
            request=ModelRequest(
                model=surface.model or self._model,
                max_tokens=max_tokens,
                sections=self._sections(self._agent_part(surface), session, cache_ttl),
                messages=tuple(messages),
                tools=tools,
                thinking_budget=thinking,
            ),
            estimated_tokens=floors + sum(costs[start:]),
            history_used=len(kept),
            floor_unmet=floors > FLOOR_SHARE * budget,
        )

    def session(self, request: TurnRequest, surface: SurfacePrompt = DEFAULT_SURFACE) -> str:
        """The session block (section 5) for this conversation on its surface."""
        instructions = surface.instructions.strip()
        return session_block(
            request,
            memory_enabled=self._memory_enabled,
            template=self._session_template,
            instructions=f"{INSTRUCTIONS_HEADING}\n\n{instructions}" if instructions else "",
            skills=self._surface_skills(surface.skills),
        )

    def _surface_skills(self, names: Sequence[str]) -> str:
        """Bodies of the surface's selected skills that are not already agent-wide."""
        agent_wide = set(self._agent.selected)
        chosen = [
            skill
            for name in names
            if name not in agent_wide and (skill := find_skill(self._agent.skills, name))
        ]
        return render_selected(chosen, self._skill_max_bytes)

    def _current_message(
        self,
        request: TurnRequest,
        memory: Sequence[MemoryHit],
        turn_skills: Sequence[Skill],
        text: str | None,
        attached: Attached,
    ) -> list[Part]:
        """The current user message's parts: the turn context, the fence, the speaker
        and the person's text with its markers; the attachments' content; recalled memory."""
        fence = preceding_fence(request.preceding, self._zone)
        label = speaker_label(request.speaker) if request.speaker is not None else None
        said = person_text(
            request.text if text is None else text,
            attached.blocks,
            host=request.continues is not None,
        )
        core = [speaker_tag(label)] if label is not None else []
        core += [skill_block(skill, self._skill_max_bytes) for skill in turn_skills]
        if said.strip() or not core:
            core.append(said)
        parts = [
            turn_context(
                request.received_at,
                self._zone,
                self._zone_name,
                len(attached.blocks),
                self._turn_template,
                request.viewing,
            ),
            fence.text,
            "\n".join(core),
        ]
        recalled = memory_block(memory, self._zone)
        files = content_blocks(attached.blocks, attached.contents)
        if not files:  # one text block, as without attachments
            parts.append(recalled)
        blocks: list[Part] = [Text("\n\n".join(part for part in parts if part))]
        if files:
            blocks += files
            if recalled:
                blocks.append(Text(recalled))
        return blocks

    def _count_session(self, session: str) -> int:
        tokens = self._session_tokens.get(session)
        if tokens is None:
            tokens = self._counter.count(session)
            self._session_tokens[session] = tokens
            if len(self._session_tokens) > _SESSION_CACHE_SIZE:
                self._session_tokens.popitem(last=False)
        else:
            self._session_tokens.move_to_end(session)
        return tokens

    def _agent_part(self, surface: SurfacePrompt) -> list[str]:
        """The agent-wide texts for the tools this surface is offered: the same computation as
        `bot tools --surface` (the host sets `surface.tools` from it; None: every tool)."""
        if surface.tools is None or any(spec.name == LOAD_SKILL_TOOL for spec in surface.tools):
            return self._agent_blocks
        return self._agent_blocks_unloadable

    def _sections(
        self, agent_blocks: Sequence[str], session: str, ttl: CacheTtl
    ) -> tuple[Section, ...]:
        """The agent-wide sections, the last one closing the agent-wide cached prefix, then the
        session block closing the conversation's."""
        sections = [Section(text) for text in agent_blocks]
        if sections:
            sections[-1] = Section(sections[-1].text, cache=ttl)
        return (*sections, Section(session, cache=ttl))

    def cache_ttl_for(self, history: Sequence[HistoryEntry], now: datetime) -> CacheTtl:
        """ "1h" when this conversation's recent user turns usually come > ~4.5 minutes apart."""
        times = [e.at for e in history if e.role == "user" and not e.summary and e.at is not None]
        moments = sorted(_aware(t) for t in times[-PACE_SAMPLE:])
        moments.append(max(_aware(now), moments[-1]) if moments else _aware(now))
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(moments)]
        if not gaps:
            return "5m"
        return "1h" if statistics.median(gaps) > SLOW_PACE_SECONDS else "5m"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _tool(spec: ToolSpec) -> ToolDef:
    return ToolDef(spec.name, spec.description, json.loads(json.dumps(spec.input_schema)))


def _tool_text(tools: Sequence[ToolDef]) -> str:
    """The tool definitions as the token estimate counts them (the wire's JSON, near enough)."""
    listed = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    return json.dumps(listed, ensure_ascii=False)
