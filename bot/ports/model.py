"""The model runtime: the plan the host hands it for one turn, and what comes back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.ports.memory import MemoryHit
from bot.ports.records import Usage
from bot.ports.request import CacheTtl, ModelRequest, Part
from bot.ports.tools import Tool, ToolSpec
from bot.turns import (
    Attached,
    Continuation,
    HistoryEntry,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)


@dataclass(frozen=True, slots=True)
class ModelRef:
    """One model a call may go to, resolved from the configuration
    (`bot.config.models.resolve_model`): its provider (the `[providers.NAME]` name, or the wire's
    for `[model]`'s own and the built-in ones), wire, endpoint and key variable (None: no key),
    its name there, what it accepts, and its context window."""

    provider: str
    wire: str  # "anthropic" | "openai"
    name: str
    base_url: str | None
    key_env: str | None
    context_window: int
    images: bool = True
    documents: bool = True
    tools: bool = True
    key_required: bool = True

    @property
    def label(self) -> str:
        """How logs, records and traces name it: `provider:model`."""
        return f"{self.provider}:{self.name}"


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """What the token budget decided for one assembled request, as the turn record keeps it."""

    estimated_tokens: int
    history_used: int
    floor_unmet: bool = False

    def details(self) -> dict[str, object]:
        return {
            "floor_unmet": self.floor_unmet,
            "estimated_tokens": self.estimated_tokens,
            "history_used": self.history_used,
        }


@dataclass(frozen=True, slots=True)
class AssembledRequest:
    """A turn's provider-neutral request, ready to encode for a wire, plus what the budget
    decided."""

    request: ModelRequest
    estimated_tokens: int
    history_used: int
    floor_unmet: bool = False

    @property
    def budget(self) -> BudgetFacts:
        return BudgetFacts(self.estimated_tokens, self.history_used, self.floor_unmet)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """An attachment's content (by content id) that the turn's model calls went without:
    `refused` by the API for what it is (left out of every later replay too), or left out for
    the request's size (this request only)."""

    content_id: str
    refused: bool


@dataclass(frozen=True)
class SurfacePrompt:
    """What the turn's surface rule changes in the request: instructions and skill bodies ride
    the session block (never the agent-wide part); the model, the answer limit and the tools
    offered there the body. The default changes nothing."""

    instructions: str = ""
    skills: tuple[str, ...] = ()
    model: str | None = None
    max_tokens: int | None = None
    thinking_budget: int | None = None  # None: the agent's own ([model] thinking_budget)
    # The tool definitions offered there, in request order (None: the assembler's own list).
    tools: tuple[ToolSpec, ...] | None = None
    # The rule's model, then its fallbacks, resolved (empty: the agent's own); the first one's
    # window is the budget's.
    models: tuple[ModelRef, ...] = ()


DEFAULT_SURFACE = SurfacePrompt()


@dataclass(frozen=True, slots=True)
class TurnPrompt:
    """Everything one turn's request is built from but the history, fixed when the turn is
    prepared: the request, the person's words after a leading `/skill` command, the skills that
    command named, recalled memory, the cache lifetime, the surface's changes and the read
    attachments. Plain data: a `PromptBuilder` turns it into a request body."""

    request: TurnRequest
    text: str
    skills: tuple[str, ...] = ()
    memory: tuple[MemoryHit, ...] = ()
    cache_ttl: CacheTtl = "5m"
    surface: SurfacePrompt = DEFAULT_SURFACE
    attached: Attached | None = None


class PromptBuilder(Protocol):
    """Builds a turn's request over a given history (the runtime builds it again after
    compacting the history)."""

    def build(self, prompt: TurnPrompt, history: Sequence[HistoryEntry], /) -> AssembledRequest:
        """The request body for `prompt` over `history`, with what the budget decided."""
        ...


@dataclass(frozen=True, slots=True)
class Breakers:
    """When the runtime stops a turn on its own (SPEC §17): `max_tokens` (input, cache and output
    tokens of all its calls together; `tokens_scope` names the limit it comes from, for the
    record and the notice) and `repeats` (how many identical tool calls, same name and
    arguments, may run: the next identical one stops the turn instead). None: no such limit."""

    max_tokens: int | None = None
    tokens_scope: str = "turn"
    repeats: int | None = None


NO_BREAKERS = Breakers()


@dataclass(frozen=True, slots=True)
class Steered:
    """A person's message taken into the running turn (SPEC §19): stored as `entry` (a user entry
    with its speaker) after what the turn had said so far, and read by the model as `blocks`
    (request parts) at the start of its next round."""

    entry: HistoryEntry
    blocks: tuple[Part, ...]


# Asked before each model round (its number, 0 first): the messages to add to it (none: nothing).
Steering = Callable[[int], Awaitable[Sequence[Steered]]]


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What the host hands the model runtime for one turn."""

    turn_id: str
    conversation_key: str
    history: Sequence[HistoryEntry]
    prompt: TurnPrompt
    builder: PromptBuilder  # builds the request from `prompt` over the (compacted) history
    tools: Sequence[Tool] = ()
    compact_only: bool = False  # `/compact`: summarize history, call nothing else
    compact_focus: str = ""  # what `/compact` was told to keep in view (`/compact focus on X`)
    on_text: Callable[[str], Awaitable[None]] | None = None  # streamed text deltas
    # Each estimate charged for a call that may have been billed without an answer (timed out,
    # cancelled, broken mid-stream): the host counts it even when the turn is cancelled.
    on_charge: Callable[[Usage], None] | None = None
    # Each tool call as it starts and each result as it ends: a turn that does not complete
    # still knows every call that ran (its continuity account lists them).
    on_tool: Callable[[ToolUseBlock | ToolResultBlock], None] | None = None
    breakers: Breakers = NO_BREAKERS
    steering: Steering | None = None  # where messages sent while the turn runs come from


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What the model runtime produced.

    `entries` are this turn's new assistant/tool entries (not the user message). `history`, when
    set, is a compacted replacement for the history the plan carried. `budget` is what the
    budget decided for the last request assembled (None when none was, as for `/compact`).
    `left_out`: attachment content the calls went without (see LeftOut), oldest first.
    """

    text: str
    entries: Sequence[HistoryEntry]
    history: Sequence[HistoryEntry] | None = None
    request: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    budget: BudgetFacts | None = None
    left_out: tuple[LeftOut, ...] = ()
    # One entry per tool call, for the turn record: tool, arguments, result_bytes, duration_ms,
    # outcome ("ok", "error", or "refused": not offered on this surface, so never run).
    tool_calls: Sequence[Mapping[str, Any]] = ()
    # What this turn's tool calls suspended it for (ToolOutput.suspends), in call order.
    suspended: tuple[Continuation, ...] = ()


class ModelRuntime(Protocol):
    async def run(self, plan: TurnPlan) -> TurnOutcome:
        """Call the model (with tool rounds and compaction); raise TurnFailed when it gives up."""

    async def aclose(self) -> None: ...


class Counter(Protocol):
    """What the runtime needs of `bot.prompt.tokens.TokenCounter`."""

    def count(self, text: str) -> int: ...

    def observe(self, estimated: int, actual: int) -> None: ...
