"""Compaction (SPEC §4): where history is split, and the summary request and entry.

The older part of a conversation becomes one summary entry written by the same model; the last
`KEEP_VERBATIM` messages stay as they were. The split never separates a tool call from its
result: a tail that would open on tool results starts one message earlier, on their call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.ports.request import Message, ModelRequest, Section, Text
from bot.prompt.attachments import marker
from bot.prompt.fence import neutralize, one_line, scrub, split_lines
from bot.prompt.message import CONTINUATION_INDENT
from bot.turns import AttachmentBlock, Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

KEEP_VERBATIM = 4
THRESHOLD = 0.85  # share of the context window at which a call is preceded by compaction
SUMMARY_MAX_TOKENS = 4096
# Each block of the transcript is bounded so one huge tool result cannot crowd out the rest.
_BLOCK_MAX_CHARS = 8_000
# Characters per token is roughly 3-4 for English; 3 keeps the transcript safely inside the window.
_CHARS_PER_TOKEN = 3
_TRANSCRIPT_SHARE = 0.6
_FOCUS_MAX_CHARS = 2_000

SUMMARY_SYSTEM = """\
You keep the running record of a chat conversation between people and an AI assistant. Its \
older messages are about to be dropped from the assistant's context, and your summary will stand \
in for them from now on. The assistant will have nothing else to go on, so anything you leave \
out is lost.

Write the summary in plain prose and short lists, in the conversation's language. Keep:
- every request people made, who made it, and whether it was answered or is still open;
- decisions and agreements, with their reasons when given;
- open work: what was promised, started or left pending, and by whom;
- facts the conversation established, and corrections made along the way;
- exact names, handles, file paths, URLs, ids, numbers, dates, commands and code identifiers, \
copied character for character;
- what tools were used for and what they found, briefly.

Leave out greetings and small talk. Do not invent anything, do not answer open requests \
yourself, and do not address anyone: write a record, not a reply. If the transcript starts with \
an earlier summary, fold it in so nothing it held is lost."""


def split_point(history: Sequence[HistoryEntry]) -> int:
    """Index where the verbatim tail starts; 0 means there is nothing older to summarize."""
    start = max(len(history) - KEEP_VERBATIM, 0)
    while start > 0 and _opens_on_results(history[start]):
        start -= 1
    return start


def _opens_on_results(entry: HistoryEntry) -> bool:
    return bool(entry.blocks) and isinstance(entry.blocks[0], ToolResultBlock)


def summary_entry(text: str, files: Sequence[AttachmentBlock] = ()) -> HistoryEntry:
    """The summary as stored, with the files shared in the part it replaces (named when it is
    replayed, never dropped); the assembler frames it (`summary=True`) when it replays history."""
    return HistoryEntry("user", (TextBlock(text.strip()), *files), summary=True)


def files_of(entries: Sequence[HistoryEntry]) -> list[AttachmentBlock]:
    """Every file shared in `entries` (an earlier summary's too), oldest first."""
    return [
        block for entry in entries for block in entry.blocks if isinstance(block, AttachmentBlock)
    ]


def summary_request(
    model: str, max_tokens: int, older: Sequence[HistoryEntry], window: int, focus: str = ""
) -> ModelRequest:
    """The request that asks the model for the summary of `older`; `focus` is what the person
    who asked for it wants kept in view (their words: fenced like the transcript)."""
    max_chars = int(window * _TRANSCRIPT_SHARE * _CHARS_PER_TOKEN)
    text = (
        "Here is the part of the conversation to summarize, oldest first. Each entry begins at "
        "the start of a line with who wrote it; every further line of an entry is indented by "
        "two spaces, so a line inside a message never starts a new entry.\n\n"
        f"<transcript>\n{transcript(older, max_chars)}\n</transcript>\n\n"
        f"{_focus(focus)}Write the summary now."
    )
    return ModelRequest(
        model=model,
        max_tokens=min(max_tokens, SUMMARY_MAX_TOKENS),
        sections=(Section(SUMMARY_SYSTEM),),
        messages=(Message("user", (Text(text),)),),
    )


def _focus(focus: str) -> str:
    said = neutralize(scrub(focus.strip()))[:_FOCUS_MAX_CHARS]
    if not said:
        return ""
    return (
        "The person who asked for this summary wants it to focus on what follows; give that the "
        "most room, and still keep everything listed in your instructions.\n"
        f"<focus>\n{said}\n</focus>\n\n"
    )


def transcript(entries: Sequence[HistoryEntry], max_chars: int) -> str:
    """A readable rendering of `entries`, the newest kept when it is over `max_chars`."""
    lines = [_render(entry) for entry in entries]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) > max_chars and kept:
            kept.append(f"[{len(lines) - len(kept)} older messages omitted for length]")
            break
        kept.append(line)
        size += len(line) + 2
    return "\n\n".join(reversed(kept))


def _render(entry: HistoryEntry) -> str:
    """One entry: `Who: first line`, further lines indented, fence tags neutralized.

    Conversation text can hold blank lines, `Assistant:` lines or a closing transcript tag; the
    indent keeps every line of it inside its entry and the neutralizing keeps the fence whole.
    """
    if entry.summary:
        who = "Earlier summary"
    elif entry.role == "user":
        label = one_line(scrub(entry.speaker or ""), 200)
        who = f"User ({label})" if label else "User"
    else:
        who = "Assistant"
    parts = [_render_block(block) for block in entry.blocks]
    body = "\n".join(p for p in parts if p)
    lines = split_lines(neutralize(scrub(f"{who}: {body}")))
    return ("\n" + CONTINUATION_INDENT).join(lines)


def _render_block(block: Block) -> str:
    if isinstance(block, TextBlock):
        return _bounded(block.text)
    if isinstance(block, AttachmentBlock):
        return marker(block)  # the summary names a file; its content is not summarized
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(dict(block.input), ensure_ascii=False, sort_keys=True)
        return f"[called tool {block.name} with {_bounded(arguments)}]"
    label = "tool error" if block.is_error else "tool result"
    return f"[{label}: {_bounded(block.content)}]"


def _bounded(text: str) -> str:
    if len(text) <= _BLOCK_MAX_CHARS:
        return text
    return text[:_BLOCK_MAX_CHARS] + f" [... {len(text) - _BLOCK_MAX_CHARS} characters cut]"
