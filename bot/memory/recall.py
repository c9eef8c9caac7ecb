"""Host-side memory recall for one turn: the per-turn lookup cache and the `memory_recall` tool.

Automatic recall (the host, before assembling) and the model's `memory_recall` tool calls go
through the same `RecallCache`, so one query is looked up at most once per turn, under the same
scope and holding back the same things (`request_holds`: what the replayed history and the
preceding-messages fence already carry). Each lookup that returns hits logs `memory_recalled`
with its source and byte size, never the remembered words. Automatic recall never fails a turn: a
store error is logged and the turn goes on without memory; the tool reports it to the model as an
error result instead.

The tool's result is the same fenced, neutralized block as automatic recall (the assembler renders
both). Recalled words are never persisted: at publish time `without_recalled_words` replaces every
`memory_recall` result in the turn's entries with one fixed placeholder, so replayed history stays
byte-stable (and cached) and a hostile memory cannot settle into history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from bot.errors import ToolError
from bot.ports.memory import MemoryHit, MemoryScope, MemoryStore, RequestHolds
from bot.ports.tools import ToolSpec
from bot.turns import Block, HistoryEntry, ToolResultBlock, ToolUseBlock, TurnRequest

log = structlog.get_logger(__name__)

QUERY_MAX_CHARS = 1_000  # a search phrase, not a document; the store bounds its own query too
NO_MATCH = "No remembered exchange matches that query."
# What history keeps of a memory_recall result: fixed bytes, so replay is stable and nothing
# recalled is ever written back.
RECALL_PLACEHOLDER = "[Recalled memory was shown here for that turn only; it is not kept.]"

MEMORY_RECALL_SPEC = ToolSpec(
    name="memory_recall",
    description=(
        "Search long-term memory: facts and requests people shared in earlier conversations "
        "that you may use here. Pass a few specific keywords (names, topics, ids). Returns the "
        "best matching remembered exchanges, or says that nothing matched. Read-only."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "keywords to look for in memory"},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


Render = Callable[[Sequence[MemoryHit]], str]


def request_holds(request: TurnRequest, history: Sequence[HistoryEntry]) -> RequestHolds:
    """What this turn's request already carries: its conversation's replayed history window (from
    the first dated entry that is not a compaction summary) and its preceding messages."""
    dated = [entry.at for entry in history if entry.at is not None and not entry.summary]
    return RequestHolds(
        conversation_key=request.conversation_key,
        history_since=min(dated) if dated else None,
        preceding=tuple(message.text for message in request.preceding),
    )


class RecallCache:
    """Memory lookups for one turn, under one scope, each distinct query asked once.

    `render` turns hits into the fenced block the model reads (the assembler's, so the tool's
    result is exactly the automatic block)."""

    def __init__(
        self,
        memory: MemoryStore | None,
        scope: MemoryScope,
        holds: RequestHolds | None = None,
        *,
        render: Render,
    ) -> None:
        self._memory = memory
        self._scope = scope
        self._holds = holds or RequestHolds()
        self._render = render
        self._hits: dict[str, list[MemoryHit]] = {}

    async def recall(self, query: str, *, source: str = "auto") -> list[MemoryHit]:
        """Hits for `query`; [] when memory is off or unavailable (logged, never raised)."""
        try:
            return await self.lookup(query, source=source)
        except Exception as exc:
            log.warning("memory_recall_failed", source=source, error=type(exc).__name__)
            return []

    async def lookup(self, query: str, *, source: str) -> list[MemoryHit]:
        """Like `recall`, but a store error propagates (the tool turns it into an error result)."""
        key = " ".join(query.split())[:QUERY_MAX_CHARS]
        if self._memory is None or not key:
            return []
        cached = key in self._hits
        if not cached:
            self._hits[key] = list(await self._memory.recall(key, self._scope, self._holds))
        hits = self._hits[key]
        if hits:
            log.info(
                "memory_recalled",
                source=source,
                hits=len(hits),
                bytes=sum(len(hit.text.encode("utf-8")) for hit in hits),
                cached=cached,
            )
        return hits

    def render(self, hits: Sequence[MemoryHit]) -> str:
        return self._render(hits)

    def tool(self) -> MemoryRecallTool:
        return MemoryRecallTool(self)


class MemoryRecallTool:
    """The read-only `memory_recall` tool, answering from the turn's RecallCache."""

    spec = MEMORY_RECALL_SPEC

    def __init__(self, cache: RecallCache) -> None:
        self._cache = cache

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("memory_recall needs a non-empty `query` string of keywords")
        try:
            hits = await self._cache.lookup(query, source="tool")
        except Exception as exc:
            log.warning("memory_recall_failed", source="tool", error=type(exc).__name__)
            raise ToolError("memory is unavailable right now; answer without it") from None
        return self._cache.render(hits) if hits else NO_MATCH


def without_recalled_words(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    """`entries` with every successful memory_recall result replaced by RECALL_PLACEHOLDER."""
    calls = {
        block.id
        for entry in entries
        for block in entry.blocks
        if isinstance(block, ToolUseBlock) and block.name == MEMORY_RECALL_SPEC.name
    }
    return [_placeheld(entry, calls) for entry in entries]


def _placeheld(entry: HistoryEntry, calls: set[str]) -> HistoryEntry:
    blocks = tuple(_placeheld_block(block, calls) for block in entry.blocks)
    return entry if blocks == entry.blocks else replace(entry, blocks=blocks, tokens=0)


def _placeheld_block(block: Block, calls: set[str]) -> Block:
    if isinstance(block, ToolResultBlock) and block.tool_use_id in calls and not block.is_error:
        return ToolResultBlock(block.tool_use_id, RECALL_PLACEHOLDER)
    return block
