"""`/schedules`: the host lists the scheduled jobs set up in chat where the person is, and removes
one for its creator or an operator (`/schedules remove ID`). No model call, no token cost."""

from __future__ import annotations

from collections.abc import Collection

from bot import replies
from bot.policy.budget import surface_key
from bot.ports.cron import ChatSchedules
from bot.turns import TurnRequest

PROMPT_SHOWN_CHARS = 80
COMMAND = "/schedules"


def is_schedules_command(text: str) -> bool:
    """Whether `text` is /schedules (with its arguments), any case."""
    word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return word == COMMAND


async def answer(
    text: str, request: TurnRequest, store: ChatSchedules, operators: Collection[str]
) -> str:
    """The reply to a /schedules message."""
    words = text.split()
    place = surface_key(request)
    if len(words) == 1:
        return await _listed(store, place, request.person)
    if len(words) == 3 and words[1].lower() == "remove":
        return await _removed(store, place, words[2], request.person, operators)
    return replies.SCHEDULES_USAGE


async def _listed(store: ChatSchedules, place: str, person: str | None) -> str:
    found = await store.schedules(place)
    if not found:
        return replies.SCHEDULES_NONE
    lines = [replies.SCHEDULES_LIST.format(count=len(found))]
    for item in found:
        prompt = " ".join(item.prompt.split())
        if len(prompt) > PROMPT_SHOWN_CHARS:
            prompt = prompt[: PROMPT_SHOWN_CHARS - 1] + "…"
        mine = person is not None and item.creator == person
        lines.append(replies.schedule_line(item.id, item.expression, item.timezone, prompt, mine))
    lines.append(replies.SCHEDULES_HOW_TO_REMOVE)
    return "\n".join(lines)


async def _removed(
    store: ChatSchedules,
    place: str,
    schedule_id: str,
    person: str | None,
    operators: Collection[str],
) -> str:
    found = {item.id: item for item in await store.schedules(place)}
    item = found.get(schedule_id)
    if item is None:
        return replies.schedule_unknown(schedule_id, sorted(found))
    if person is None or (item.creator != person and person not in operators):
        return replies.SCHEDULE_NOT_YOURS
    await store.remove_schedule(item.id)
    return replies.SCHEDULE_REMOVED.format(id=item.id)
