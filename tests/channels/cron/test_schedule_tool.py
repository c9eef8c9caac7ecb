"""The `schedule` tool on its own: who may use it, its bounds (per place, per person, minimum
interval), list and remove, and what it refuses; never a route in what the model reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import replies
from bot.errors import ToolError
from bot.ports.cron import ChatSchedule
from bot.ports.tools import Tool
from bot.turns import ConversationKind, ReplyRoute, Surface, SurfaceKind, TurnRequest
from channels.cron.chat import ScheduleDesk, allowed, place_of
from channels.cron.settings import SchedulesSettings
from tests.channels.cron.test_chat_jobs import StoredSchedules

NOW = datetime(2030, 1, 7, 7, 0, tzinfo=UTC)
ROUTE = ReplyRoute("telegram", {"chat_id": -100555, "thread_id": None, "reply_to": 9})
GROUP = Surface(SurfaceKind.GROUP, "-100555", "Team", shared=True)


class Bounded(StoredSchedules):
    """The store double, with the bounds the real stores keep."""

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        if sum(s.place == schedule.place for s in self.items) >= per_place:
            return "place"
        if sum(s.creator == schedule.creator for s in self.items) >= per_person:
            return "person"
        self.items.append(schedule)
        return ""

    async def remove_schedule(self, schedule_id: str) -> bool:
        before = len(self.items)
        self.items = [s for s in self.items if s.id != schedule_id]
        return len(self.items) < before


def request(person: str | None = "telegram:42", surface: Surface | None = GROUP) -> TurnRequest:
    return TurnRequest(
        conversation_key="telegram:-100555",
        kind=ConversationKind.PUSH,
        channel="telegram",
        text="schedule it",
        received_at=NOW,
        turn_id="t1",
        surface=surface,
        route=ROUTE if surface is not None else None,
        person=person,
    )


def desk(store: Bounded, **settings: object) -> ScheduleDesk:
    values = {"allowed": ["telegram:42", "telegram:43"], "max_per_conversation": 2, **settings}
    return ScheduleDesk(
        store,
        SchedulesSettings.model_validate(values),
        "Europe/Berlin",
        operators=frozenset({"telegram:7"}),
        now=lambda: NOW,
    )


async def create(tool: Tool, when: str = "every weekday at 9", prompt: str = "Post it.") -> str:
    return await tool({"action": "create", "when": when, "prompt": prompt})


async def test_create_list_and_remove_here() -> None:
    store = Bounded([])
    tool = desk(store).tool(request())
    made = await create(tool)
    [item] = store.items
    assert made.startswith(f"Scheduled job {item.id}: '0 9 * * 1-5' in Europe/Berlin")
    assert "Mon 2030-01-07 09:00 CET" in made
    assert (item.place, item.route, item.creator) == ("telegram:-100555", ROUTE, "telegram:42")
    listed = await tool({"action": "list"})
    assert item.id in listed
    assert "set up by this person: yes" in listed
    assert "-100555" not in listed.replace("telegram:-100555", "")  # no route, no chat id
    other = desk(store).tool(request("telegram:43"))
    with pytest.raises(ToolError, match="only the person who set up"):
        await other({"action": "remove", "id": item.id})
    with pytest.raises(ToolError, match='no scheduled job "nope"'):
        await tool({"action": "remove", "id": "nope"})
    assert await tool({"action": "remove", "id": item.id}) == f"Removed scheduled job {item.id}."
    assert await tool({"action": "list"}) == "No scheduled jobs here."


async def test_an_operator_removes_anyones_job() -> None:
    store = Bounded([])
    await create(desk(store).tool(request()))
    operator = desk(store, allowed=["telegram:42", "telegram:7"]).tool(request("telegram:7"))
    assert (await operator({"action": "remove", "id": store.items[0].id})).startswith("Removed")


async def test_bounds_per_place_per_person_and_interval() -> None:
    store = Bounded([])
    tool = desk(store, max_per_person=3).tool(request())
    await create(tool)
    await create(tool, "every day at 18")
    with pytest.raises(ToolError) as caught:
        await create(tool, "every day at 7")
    assert str(caught.value) == replies.schedule_limit("place", 2)
    with pytest.raises(ToolError) as caught:
        await create(tool, "*/5 * * * *")
    assert str(caught.value) == replies.schedule_too_often(60)


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"action": "create", "when": "sometime", "prompt": "x"}, "Fix: write it like"),
        ({"action": "create", "when": "every day at 9"}, "prompt is missing"),
        ({"action": "create", "when": "every day at 9", "prompt": "x" * 2001}, "longer than"),
        ({"action": "dance"}, "action must be"),
    ],
)
async def test_what_it_refuses(arguments: dict[str, object], match: str) -> None:
    with pytest.raises(ToolError, match=match):
        await desk(Bounded([])).tool(request())(arguments)


async def test_people_not_allowed_and_places_without_a_route_are_refused() -> None:
    with pytest.raises(ToolError) as caught:
        await create(desk(Bounded([])).tool(request("telegram:99")))
    assert str(caught.value) == replies.SCHEDULE_NOT_ALLOWED
    with pytest.raises(ToolError) as caught:
        await create(desk(Bounded([])).tool(request(surface=None)))
    assert str(caught.value) == replies.SCHEDULE_NOWHERE


def test_who_is_allowed() -> None:
    listed = ["slack:U0ALICE", "telegram:42"]
    assert allowed("slack:T0TEAM:U0ALICE", listed)
    assert allowed("telegram:42", listed)
    assert not allowed("telegram:421", listed)
    assert not allowed("slack:T0TEAM:U0BOB", listed)
    assert not allowed(None, listed)
    assert place_of(request()) == "telegram:-100555"
    assert place_of(request(surface=None)) == "telegram:-100555"
