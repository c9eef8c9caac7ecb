"""Tools: what the model may call, and how it describes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        """Run the tool; raise ToolError (or anything) for an error result."""
