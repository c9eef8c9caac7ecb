"""Attachment content a turn's model calls went without (pure): one line for the person about each
file, and the turn's own stored message with refused files marked, so they are never replayed.

The model runtime leaves content out for two reasons (`bot.ports.model.LeftOut`): the request's
size (this request only: the file is replayed later if the budget then allows, so only a file of
this message is worth a line), or the API's refusal of the content itself (for good: the person
hears about it whichever turn carried it, and the file is dropped from the conversation's
replays, SPEC §11).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot import replies
from bot.ports.model import LeftOut
from bot.turns import AttachmentBlock, HistoryEntry


def refused_ids(left_out: Sequence[LeftOut]) -> list[str]:
    return [item.content_id for item in left_out if item.refused]


def notice_lines(
    left_out: Sequence[LeftOut], user_entry: HistoryEntry, history: Sequence[HistoryEntry]
) -> list[str]:
    """One line per file left out, in order, each file once."""
    mine = _names([user_entry])
    earlier = _names(history)
    lines: list[str] = []
    for item in left_out:
        name = mine.get(item.content_id)
        if item.refused:
            name = name or earlier.get(item.content_id)
            reason = replies.MODEL_REFUSED_FILE
        else:
            reason = replies.LEFT_OUT_FOR_SIZE
        line = replies.attachment_problem(name, reason) if name is not None else None
        if line is not None and line not in lines:
            lines.append(line)
    return lines


def marked(user_entry: HistoryEntry, refused: Sequence[str]) -> HistoryEntry:
    """The stored user message with each refused file of its own as not read (marker only)."""
    if not refused:
        return user_entry
    blocks = tuple(
        replace(block, content_id=None, problem=replies.MODEL_REFUSED_FILE)
        if isinstance(block, AttachmentBlock) and block.content_id in refused
        else block
        for block in user_entry.blocks
    )
    return replace(user_entry, blocks=blocks)


def _names(entries: Sequence[HistoryEntry]) -> dict[str, str]:
    return {
        block.content_id: block.name
        for entry in entries
        for block in entry.blocks
        if isinstance(block, AttachmentBlock) and block.content_id is not None
    }
