"""Tools: what the model may call, and how it describes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.turns import Continuation


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolImage:
    """An image a tool returned, ready for the model (within the API's limits): base64 `data`."""

    media_type: str
    data: str


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A result with images. `text` is the result as history keeps it; the images ride only the
    request that follows the call (history replays the text, which says they were shown)."""

    text: str
    images: tuple[ToolImage, ...] = ()
    # The turn record's outcome of the call when not plainly ok (`waiting_approval`), and any
    # facts the record keeps with it (the approval id).
    outcome: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    # The call cannot finish now (it waits for an approval): the turn suspends, and this
    # continuation carries on once it is decided.
    suspends: Continuation | None = None


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def __call__(self, arguments: Mapping[str, Any]) -> str | ToolOutput:
        """Run the tool; raise ToolError (or anything) for an error result."""


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
