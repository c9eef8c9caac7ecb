"""Host-side memory recall for one turn: the per-turn lookup cache and the `memory_recall` tool.

Automatic recall (the host, before assembling) and the model's `memory_recall` tool calls go
through the same `RecallCache`, so one query is looked up at most once per turn. Each lookup that
returns hits logs `memory_recalled` with its source and byte size, never the remembered words.
Automatic recall never fails a turn: a store error is logged and the turn goes on without memory;
the tool reports it to the model as an error result instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from bot.ports import MemoryHit, MemoryScope, MemoryStore, ToolError, ToolSpec

log = structlog.get_logger(__name__)

QUERY_MAX_CHARS = 1_000  # a search phrase, not a document; the store bounds its own query too

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


class RecallCache:
    """Memory lookups for one turn, under one scope, each distinct query asked once."""

    def __init__(self, memory: MemoryStore | None, scope: MemoryScope) -> None:
        self._memory = memory
        self._scope = scope
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
            self._hits[key] = list(await self._memory.recall(key, self._scope))
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
        return render_hits(hits)


def render_hits(hits: Sequence[MemoryHit]) -> str:
    """Hits as plain text for a tool result: one dated entry each, best first."""
    if not hits:
        return "No remembered exchange matches that query."
    parts = [f"[{hit.captured_at.date().isoformat()}]\n{hit.text}" for hit in hits]
    return "\n\n".join(parts)
