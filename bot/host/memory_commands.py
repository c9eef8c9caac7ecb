"""People's own memory in the chat (SPEC §6): `/memory` and `/forget N` / `/forget all`.

The host answers these itself: they never reach the model, are never captured or kept in
history, and cost no tokens. They act only on the speaker's own entries (`MemoryStore.own`,
`forget_own`), in the current scope: in a DM everything the person said anywhere, elsewhere what
they said in this surface. `/memory` numbers entries newest first, and `/forget N` means the N-th
of that same list.
"""

from __future__ import annotations

import re

from bot import replies
from bot.ports.memory import MemoryScope, MemoryStore

SHOWN = 10  # entries a /memory answer lists; the rest are counted
SAID_MAX_CHARS = 80
_NUMBER = re.compile(r"[0-9]{1,6}")


def is_memory_command(text: str) -> bool:
    """Whether `text` is /memory or /forget (with its arguments), any case."""
    word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return word in ("/memory", "/forget")


async def answer(
    text: str,
    person: str | None,
    scope: MemoryScope,
    memory: MemoryStore | None,
    *,
    console: bool = False,
) -> str:
    """The reply to a /memory or /forget message (`console`: typed in `bot chat`)."""
    if memory is None:
        return replies.MEMORY_OFF
    if person is None:
        return replies.MEMORY_CONSOLE if console else replies.MEMORY_NOBODY
    command, _, argument = text.strip().partition(" ")
    if command.lower() == "/memory":
        return await _listing(person, scope, memory)
    return await _forget(person, scope, memory, argument.strip().lower())


async def _listing(person: str, scope: MemoryScope, memory: MemoryStore) -> str:
    entries, total = await memory.own(person, scope, SHOWN)
    if not entries:
        return replies.MEMORY_EMPTY
    lines = [replies.MEMORY_LIST.format(total=total)]
    for number, entry in enumerate(entries, start=1):
        day, origin = entry.captured_at.date().isoformat(), replies.MEMORY_ORIGINS[entry.origin]
        lines.append(f"{number}. ({day}, {origin}) {_short(entry.said)}")
    if total > len(entries):
        lines.append(replies.MEMORY_MORE.format(count=total - len(entries)))
    lines.append(replies.MEMORY_HOW_TO_FORGET)
    return "\n".join(lines)


async def _forget(person: str, scope: MemoryScope, memory: MemoryStore, argument: str) -> str:
    if argument == "all":
        count = await memory.forget_own(person, scope)
        return replies.FORGOT_ALL.format(count=count) if count else replies.FORGOT_NOTHING
    if not _NUMBER.fullmatch(argument) or int(argument) < 1:
        return replies.FORGET_USAGE
    number = int(argument)
    entries, total = await memory.own(person, scope, number)
    if number > len(entries):
        return replies.FORGET_NO_SUCH.format(number=number, total=total)
    entry = entries[number - 1]
    if not await memory.forget_own(person, scope, [entry.id]):
        return replies.FORGOT_NOTHING
    return replies.FORGOT_ONE.format(number=number, said=_short(entry.said))


def _short(said: str) -> str:
    line = " ".join(said.split())
    return line if len(line) <= SAID_MAX_CHARS else line[: SAID_MAX_CHARS - 1].rstrip() + "…"
