"""A chat schedule keeps the tools its place offered when it was set up (SPEC §17), on every
engine; one stored before that was kept gets the built-in tools only, never the `cron` rule's."""

from __future__ import annotations

import pytest

from bot.policy.surfaces import BUILTIN_TOOLS
from bot.ports.cron import ChatSchedule
from bot.store.postgres import schema as pg_schema
from bot.store.sqlite import schema as sqlite_schema
from bot.turns import ReplyRoute
from tests.channels.cron.doubles import utc
from tests.engines import Engine
from tests.store.older import at_version

pytestmark = pytest.mark.all_engines

ROUTE = ReplyRoute("slack", {"channel": "D0ALICE01"})


async def test_a_schedule_keeps_its_tools(engine: Engine) -> None:
    store = await engine.open()
    try:
        runs = await store.cron_runs()
        made = ChatSchedule(
            "a1",
            "slack:D0ALICE01",
            ROUTE,
            "slack:T:U1",
            "0 9 * * *",
            "UTC",
            "Sum up.",
            utc(2024, 6, 3, 9),
            tools=("notes__search", "schedule"),
        )
        assert await runs.add_schedule(made, per_place=5, per_person=5) == ""
        [kept] = await runs.schedules()
        await runs.aclose()
    finally:
        await store.aclose()
    assert kept.tools == ("notes__search", "schedule")


@pytest.mark.both_engines
async def test_a_schedule_stored_before_tools_were_kept_gets_the_built_in_tools_only(
    engine: Engine,
) -> None:
    migrations = sqlite_schema if engine.name == "sqlite" else pg_schema
    before = migrations.MIGRATIONS.index(migrations._V_SCHEDULE_TOOLS)
    await at_version(
        engine,
        before,
        "INSERT INTO chat_schedules (id, place, route, creator, expression, timezone, prompt, "
        """created_at) VALUES ('old1', 'slack:D0ALICE01', '{"platform":"slack","values":"""
        """{"channel":"D0ALICE01"}}', 'slack:T:U1', '0 9 * * *', 'UTC', 'Sum up.', 0)""",
    )
    store = await engine.open()
    try:
        runs = await store.cron_runs()
        [old] = await runs.schedules()
        await runs.aclose()
    finally:
        await store.aclose()
    assert set(old.tools) == BUILTIN_TOOLS
