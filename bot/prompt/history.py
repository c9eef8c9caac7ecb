"""Conversation history (section 6): stored entries trimmed to the budget and replayed as valid
neutral messages (`bot.ports.request`).

Trimming drops whole entries, oldest first, and never starts on a tool result whose call was
dropped. Rendering merges adjacent same-role entries into one message, makes sure the first
message is the user's, and repairs any call/result pair the API would refuse (a call without its
result, a result without its call) by turning the stray block into plain text, so one odd stored
row can never make every later turn of the conversation fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from bot.ports.request import Message, Part, Role, Text, ToolCall, ToolResult
from bot.prompt.attachments import attachment_tokens, content_blocks, markers
from bot.prompt.fence import scrub
from bot.prompt.message import speaker_tag, untrusted
from bot.turns import AttachmentBlock, Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

_SUMMARY_PREAMBLE = (
    "The earlier part of this conversation, summarized by the host to save space. It stands in "
    "for the messages it replaced."
)
_SUMMARY_FILES = "Files shared in the part of the conversation this summary replaces:"
LEADING_GAP_TEXT = "[The start of this conversation is not shown here.]"
EMPTY_TEXT = "[empty message]"


def entry_tokens(entry: HistoryEntry, count: Callable[[str], int]) -> int:
    """The entry's cached estimate, or a fresh count of its content when none was cached."""
    if entry.tokens > 0:
        return entry.tokens
    files = [b for b in entry.blocks if isinstance(b, AttachmentBlock)]
    replayed = [] if entry.summary else files  # a summary names its files, never replays them
    return count(_countable_text(entry)) + sum(map(attachment_tokens, replayed))


def _countable_text(entry: HistoryEntry) -> str:
    parts: list[str] = [entry.speaker or ""]
    for block in entry.blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            parts.append(block.name + json.dumps(dict(block.input), ensure_ascii=False))
        elif isinstance(block, ToolResultBlock):
            parts.append(block.aged or block.content)
        else:
            parts.append(markers([block]))
    return "\n".join(parts)


def trim(entries: Sequence[HistoryEntry], costs: Sequence[int], budget: int) -> int:
    """How many entries to drop from the front so the rest costs at most `budget` tokens."""
    total = 0
    start = len(entries)
    for index in range(len(entries) - 1, -1, -1):
        if total + costs[index] > budget:
            break
        total += costs[index]
        start = index
    while start < len(entries) and _opens_on_result(entries[start]):
        start += 1
    return start


def _opens_on_result(entry: HistoryEntry) -> bool:
    return any(isinstance(block, ToolResultBlock) for block in entry.blocks)


def render(
    entries: Sequence[HistoryEntry], contents: Mapping[str, bytes] | None = None
) -> list[Message]:
    """The entries as neutral messages: alternating roles, user first, pairs intact.

    `contents` holds the stored bytes of attachments (by content id): an attachment whose bytes
    are there is replayed as content, any other as its marker alone.
    """
    turns: list[tuple[Role, list[Part]]] = []
    for entry in entries:
        role, parts = _render_entry(entry, contents or {})
        if not parts:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)
        else:
            turns.append((role, parts))
    if turns and turns[0][0] == "assistant":
        turns.insert(0, ("user", [_text(LEADING_GAP_TEXT)]))
    _repair_tool_pairs(turns)
    return [Message(role, tuple(parts)) for role, parts in turns]


def _render_entry(entry: HistoryEntry, contents: Mapping[str, bytes]) -> tuple[Role, list[Part]]:
    if entry.summary:
        text = f"<conversation_summary>\n{_SUMMARY_PREAMBLE}\n\n{untrusted(entry.text)}\n"
        files = [b for b in entry.blocks if isinstance(b, AttachmentBlock)]
        if files:
            text += f"\n{_SUMMARY_FILES}\n{markers(files)}\n"
        return "user", [_text(text + "</conversation_summary>")]
    if entry.role == "assistant":
        return "assistant", [b for b in map(_assistant_part, entry.blocks) if b is not None]
    return "user", _user_parts(entry, contents)


def _assistant_part(block: Block) -> Part | None:
    if isinstance(block, TextBlock):
        # The model's own words, but they may quote someone else's: neutralized like the rest.
        return _text(untrusted(block.text)) if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return ToolCall(block.id, block.name, dict(block.input))
    if isinstance(block, AttachmentBlock):
        return _text(markers([block]))
    return _stray_result(block)


def _user_parts(entry: HistoryEntry, contents: Mapping[str, bytes]) -> list[Part]:
    """Text parts (the first labelled with the speaker), the attachment markers appended to the
    last text, then the attachments' content."""
    files = [b for b in entry.blocks if isinstance(b, AttachmentBlock)]
    parts = _user_text_parts(entry)
    if not files:
        return parts
    listed = markers(files)
    last = parts[-1] if parts else None
    if isinstance(last, Text):
        text = last.text
        parts[-1] = Text(listed if text == EMPTY_TEXT else f"{text}\n\n{listed}")
    else:
        parts.append(_text(listed))
    return parts + content_blocks(files, contents)


def _user_text_parts(entry: HistoryEntry) -> list[Part]:
    parts: list[Part] = []
    labelled = entry.speaker is None
    shown = scrub if entry.host_note else untrusted  # a host note was made safe when written
    for block in entry.blocks:
        if isinstance(block, AttachmentBlock):
            continue
        if isinstance(block, ToolResultBlock):
            parts.append(tool_result(block))
        elif isinstance(block, ToolUseBlock):
            parts.append(_text(f"[Tool call {block.name} recorded on the wrong side; skipped.]"))
        elif not labelled:
            parts.append(_text(f"{speaker_tag(entry.speaker or '')}\n{shown(block.text)}"))
            labelled = True
        elif block.text.strip():
            parts.append(_text(shown(block.text)))
    if not labelled:
        parts.append(_text(speaker_tag(entry.speaker or "")))
    return parts


def _text(text: str) -> Text:
    return Text(text if text.strip() else EMPTY_TEXT)


def tool_result(block: ToolResultBlock) -> ToolResult:
    """A stored tool result as a request part (the tool loop sends the same); an aged result
    as its short reference."""
    return ToolResult(block.tool_use_id, block.aged or block.content, block.is_error)


def _stray_result(block: ToolResultBlock) -> Text:
    outcome = "failed" if block.is_error else "returned"
    return _text(f"[An earlier tool call {outcome}: {untrusted(block.aged or block.content)}]")


def _repair_tool_pairs(turns: list[tuple[Role, list[Part]]]) -> None:
    """Turn every unpaired tool call / result into text; put results first in user turns."""
    for index, (role, parts) in enumerate(turns):
        if role == "assistant":
            following = turns[index + 1] if index + 1 < len(turns) else None
            answered = _result_ids(following)
            parts[:] = [_pair_call(p, answered) for p in parts]
        else:
            before = turns[index - 1] if index > 0 else None
            called = _call_ids(before)
            content = [_pair_result(p, called) for p in parts]
            results = [p for p in content if isinstance(p, ToolResult)]
            parts[:] = results + [p for p in content if not isinstance(p, ToolResult)]


def _result_ids(turn: tuple[Role, list[Part]] | None) -> set[str]:
    if turn is None:
        return set()
    return {p.call_id for p in turn[1] if isinstance(p, ToolResult)}


def _call_ids(turn: tuple[Role, list[Part]] | None) -> set[str]:
    if turn is None or turn[0] != "assistant":
        return set()
    return {p.id for p in turn[1] if isinstance(p, ToolCall)}


def _pair_call(part: Part, answered: set[str]) -> Part:
    if not isinstance(part, ToolCall) or part.id in answered:
        return part
    return _text(f"[Called the tool {part.name}; no result was recorded.]")


def _pair_result(part: Part, called: set[str]) -> Part:
    if not isinstance(part, ToolResult) or part.call_id in called:
        return part
    return _stray_result(ToolResultBlock(part.call_id, part.content, part.is_error))
