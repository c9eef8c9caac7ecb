"""Conversation history (section 6): stored entries trimmed to the budget and replayed as valid
Messages API turns.

Trimming drops whole entries, oldest first, and never starts on a tool result whose call was
dropped. Rendering merges adjacent same-role entries into one message, makes sure the first
message is the user's, and repairs any call/result pair the API would refuse (a call without its
result, a result without its call) by turning the stray block into plain text, so one odd stored
row can never make every later turn of the conversation fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.prompt.attachments import attachment_tokens, content_blocks, markers
from bot.prompt.message import speaker_tag, untrusted
from bot.turns import AttachmentBlock, Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

Message = dict[str, Any]
ContentBlock = dict[str, Any]

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
    """The entries as Messages API messages: alternating roles, user first, pairs intact.

    `contents` holds the stored bytes of attachments (by content id): an attachment whose bytes
    are there is replayed as content, any other as its marker alone.
    """
    messages: list[Message] = []
    for entry in entries:
        role, blocks = _render_entry(entry, contents or {})
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [_text(LEADING_GAP_TEXT)]})
    _repair_tool_pairs(messages)
    return messages


def _render_entry(
    entry: HistoryEntry, contents: Mapping[str, bytes]
) -> tuple[str, list[ContentBlock]]:
    if entry.summary:
        text = f"<conversation_summary>\n{_SUMMARY_PREAMBLE}\n\n{untrusted(entry.text)}\n"
        files = [b for b in entry.blocks if isinstance(b, AttachmentBlock)]
        if files:
            text += f"\n{_SUMMARY_FILES}\n{markers(files)}\n"
        return "user", [_text(text + "</conversation_summary>")]
    if entry.role == "assistant":
        return "assistant", [b for b in map(_assistant_block, entry.blocks) if b is not None]
    return "user", _user_blocks(entry, contents)


def _assistant_block(block: Block) -> ContentBlock | None:
    if isinstance(block, TextBlock):
        # The model's own words, but they may quote someone else's: neutralized like the rest.
        return _text(untrusted(block.text)) if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, AttachmentBlock):
        return _text(markers([block]))
    return _stray_result(block)


def _user_blocks(entry: HistoryEntry, contents: Mapping[str, bytes]) -> list[ContentBlock]:
    """Text blocks (the first labelled with the speaker), the attachment markers appended to the
    last text, then the attachments' content."""
    files = [b for b in entry.blocks if isinstance(b, AttachmentBlock)]
    blocks = _user_text_blocks(entry)
    if not files:
        return blocks
    listed = markers(files)
    last = blocks[-1] if blocks and blocks[-1]["type"] == "text" else None
    if last is not None:
        text = last["text"]
        last["text"] = listed if text == EMPTY_TEXT else f"{text}\n\n{listed}"
    else:
        blocks.append(_text(listed))
    return blocks + content_blocks(files, contents)


def _user_text_blocks(entry: HistoryEntry) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    labelled = entry.speaker is None
    for block in entry.blocks:
        if isinstance(block, AttachmentBlock):
            continue
        if isinstance(block, ToolResultBlock):
            blocks.append(tool_result_block(block))
        elif isinstance(block, ToolUseBlock):
            blocks.append(_text(f"[Tool call {block.name} recorded on the wrong side; skipped.]"))
        elif not labelled:
            blocks.append(_text(f"{speaker_tag(entry.speaker or '')}\n{untrusted(block.text)}"))
            labelled = True
        elif block.text.strip():
            blocks.append(_text(untrusted(block.text)))
    if not labelled:
        blocks.append(_text(speaker_tag(entry.speaker or "")))
    return blocks


def _text(text: str) -> ContentBlock:
    return {"type": "text", "text": text if text.strip() else EMPTY_TEXT}


def tool_result_block(block: ToolResultBlock) -> ContentBlock:
    """A tool result in the Messages API's request form (the tool loop sends the same)."""
    rendered: ContentBlock = {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.aged or block.content,  # an aged result: its short reference
    }
    if block.is_error:
        rendered["is_error"] = True
    return rendered


def _stray_result(block: ToolResultBlock) -> ContentBlock:
    outcome = "failed" if block.is_error else "returned"
    return _text(f"[An earlier tool call {outcome}: {untrusted(block.aged or block.content)}]")


def _repair_tool_pairs(messages: list[Message]) -> None:
    """Turn every unpaired tool_use / tool_result into text; put results first in user turns."""
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else None
            answered = _result_ids(following)
            message["content"] = [_pair_use(b, answered) for b in message["content"]]
        else:
            before = messages[index - 1] if index > 0 else None
            called = _use_ids(before)
            content = [_pair_result(b, called) for b in message["content"]]
            results = [b for b in content if b["type"] == "tool_result"]
            message["content"] = results + [b for b in content if b["type"] != "tool_result"]


def _result_ids(message: Message | None) -> set[str]:
    if message is None:
        return set()
    return {b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"}


def _use_ids(message: Message | None) -> set[str]:
    if message is None or message["role"] != "assistant":
        return set()
    return {b["id"] for b in message["content"] if b["type"] == "tool_use"}


def _pair_use(block: ContentBlock, answered: set[str]) -> ContentBlock:
    if block["type"] != "tool_use" or block["id"] in answered:
        return block
    return _text(f"[Called the tool {block['name']}; no result was recorded.]")


def _pair_result(block: ContentBlock, called: set[str]) -> ContentBlock:
    if block["type"] != "tool_result" or block["tool_use_id"] in called:
        return block
    return _stray_result(
        ToolResultBlock(block["tool_use_id"], str(block["content"]), bool(block.get("is_error")))
    )
