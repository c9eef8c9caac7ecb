"""What one model call answered, whatever the wire: its text, the tool calls it asks for, the
assistant message to replay in the next round, and the facts traces and logs name."""

from __future__ import annotations

from dataclasses import dataclass

from bot.ports.request import Message
from bot.turns import ToolUseBlock


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    calls: tuple[ToolUseBlock, ...]
    message: Message  # the assistant message as the next round replays it
    stop_reason: str
    model: str  # the model that answered, as the server names it
    id: str = ""
