"""Small builders of history entries for the store tests."""

from __future__ import annotations

from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock


def user(text: str, speaker: str | None = None, tokens: int = 0) -> HistoryEntry:
    return HistoryEntry("user", (TextBlock(text),), speaker=speaker, tokens=tokens)


def assistant(text: str, tokens: int = 0) -> HistoryEntry:
    return HistoryEntry("assistant", (TextBlock(text),), tokens=tokens)


def tool_call(call_id: str, query: str) -> HistoryEntry:
    return HistoryEntry("assistant", (ToolUseBlock(call_id, "memory_recall", {"query": query}),))


def tool_result(call_id: str, content: str) -> HistoryEntry:
    return HistoryEntry("user", (ToolResultBlock(call_id, content),))


def turn(n: int, padding: str = "") -> list[HistoryEntry]:
    """A four-message turn with one tool round, every message tagged with the turn number (the
    result followed by `padding`)."""
    return [
        user(f"question {n}", speaker="Alice (@alice)"),
        tool_call(f"call-{n}", f"lookup {n}"),
        tool_result(f"call-{n}", f"result {n}{padding}"),
        assistant(f"answer {n}"),
    ]
