"""The provider-neutral model request (SPEC §8): sections, cache positions and messages of
text, image, document, tool-call and tool-result parts, as the assembler builds it and every wire
encoder in `bot.model` reads it.

Cache positions are where a prefix ends that the next request will repeat byte for byte: after
a section (`Section.cache`) or after a message (`Message.cache`), each with its lifetime. A wire
with explicit breakpoints (Anthropic's `cache_control`) marks them; a wire with automatic prefix
caching (OpenAI's) needs nothing but the same bytes in the same order.

`Native` carries a part one wire returned and wants back verbatim (Anthropic's thinking blocks
within a tool loop); every other wire leaves it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

CacheTtl = Literal["5m", "1h"]
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image's bytes, base64 (the host re-encoded it within the API's limits)."""

    media_type: str
    data: str


@dataclass(frozen=True, slots=True)
class Document:
    """A PDF's bytes, base64."""

    media_type: str
    data: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result; `images` (a tool may return some) follow its text."""

    call_id: str
    content: str
    is_error: bool = False
    images: tuple[Image, ...] = ()


@dataclass(frozen=True, slots=True)
class Native:
    """A part only `wire` understands, replayed to it exactly as it returned it."""

    wire: str
    data: Mapping[str, Any]


Part = Text | Image | Document | ToolCall | ToolResult | Native


@dataclass(frozen=True, slots=True)
class Section:
    """One system section (guardrails, identity, skills, the session block)."""

    text: str
    cache: CacheTtl | None = None  # a cached prefix ends after this section


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...]
    cache: CacheTtl | None = None  # a cached prefix ends after this message


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call's request. Consecutive messages may share a role (the current message after a
    history that ends on the person's side): a wire that needs alternation merges them."""

    model: str
    max_tokens: int
    sections: tuple[Section, ...]
    messages: tuple[Message, ...]
    tools: tuple[ToolDef, ...] = ()
    tool_choice: Literal["auto", "none"] = "auto"
    # Extended thinking's budget in tokens (part of max_tokens); 0: none. A wire without it
    # sends none.
    thinking_budget: int = 0
