"""Approvals across replicas (SPEC §13, §14): two whole Apps on one PostgreSQL database, Telegram
in webhook mode. The card is posted by one replica; the approver's press reaches the other, which
decides and submits the continuation; the conversation's lane runs it (on whichever replica
adopts the conversation) and the call runs once. A press that reaches the first replica after
that changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import replies
from bot.cli.compose import App
from tests.channels.telegram.conftest import tg  # noqa: F401
from tests.engines import Engine
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.telegram import FakeTelegram
from tests.mcp.conftest import CallLog
from tests.mcp.test_telegram_approvals import DELETE, ask, config, last_user_text, people, press
from tests.waiting import until

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]
SECRET = "replica-webhook-secret"


async def test_the_press_reaches_the_replica_that_did_not_post_the_card(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
    engine: Engine,
) -> None:
    alice, bob, chat = people(tg)
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.", "Deleted, on replica two.")
    settings = config(
        agent_dir,
        tg,
        claude,
        call_log,
        'mode = "webhook"\nwebhook_url = "https://bot.example/telegram/webhook"\n',
        BOT_HTTP__ENABLED="true",
        BOT_HTTP__PORT="0",
        BOT_STORE__URL=str(engine.location),
        TELEGRAM_WEBHOOK_SECRET=SECRET,
    )

    def deliver_to(app: App) -> None:
        """Telegram's webhook now points at `app` (a balancer's choice)."""
        url = f"http://127.0.0.1:{app.http_port}/telegram/webhook"
        tg.webhook = {"url": url, "secret_token": SECRET}

    async with App(settings) as poster, App(settings) as other:
        deliver_to(poster)
        card = await ask(poster, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        deliver_to(other)
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: len(claude.requests) >= 3)
        await until(lambda: any("Deleted, on replica two." in s.plain for s in tg.sent))
        for app in (poster, other):
            await app.host.idle()
        deliver_to(poster)
        late = await press(tg, card, bob, approve)
        assert other.approvals is not None
        [decided] = await other.approvals.listing()
        asked = await other.store.records.show(decided.turn_id)
    assert late == replies.approval_already("approved")
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [("delete", {"text": "milk"})]
    assert (decided.state, decided.decided_by) == ("approved", "telegram:4242")
    assert decided.result is not None
    assert "deleted 0 note(s)" in decided.result
    assert "deleted 0 note(s)" in last_user_text(claude.requests[2])  # what the model read next
    assert asked is not None
    assert asked["outcome"] == "suspended"
    assert [s.plain for s in tg.sent].count("Deleted, on replica two.") == 1
