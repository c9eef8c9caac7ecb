"""Approvals on Telegram (SPEC §14), end to end: the notes server's destructive `delete` through
the real PTB client, the Telegram fake's inline keyboard and callback queries, and the store.

The requester and a stranger are refused privately; the approver's press runs the call once with
the arguments the card showed, in the conversation's lane (after what was queued there before
it); deny and expiry never run it; a restart in between changes nothing of that, and a restart
during the call never runs it again; a second press and a forged one change nothing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot import replies
from bot.cli import main
from bot.cli.compose import App
from bot.cli.settings import Config, load_config
from bot.turns import Continuation
from tests.channels.telegram.conftest import tg  # noqa: F401
from tests.conftest import write_config
from tests.engines import Clock
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.telegram import FakeTelegram, Sent
from tests.mcp.conftest import CallLog, server_toml
from tests.waiting import until

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

RULE = '\n[[surfaces]]\nplatform = "telegram"\nkind = "dm"\ntools = ["notes__*"]\n'
APPROVALS = '\n[approvals]\napprovers = ["telegram:4242", "telegram:42"]\nexpire_minutes = 30\n'
DELETE = ToolCall("notes__delete", {"text": "milk"})


def people(tg: FakeTelegram) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:  # noqa: F811
    """Alice asks in her DM; Bob (4242) is the approver."""
    alice = tg.user("Alice", "Chen", "alice", user_id=42)
    bob = tg.user("Bob", "Ito", "bob", user_id=4242)
    return alice, bob, tg.private_chat(alice)


def config(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    log: CallLog,
    telegram: str = "",
    server: str = "",
    **env: str,
) -> Config:
    """`telegram`: more of its section; `server`: more of the notes server's entry."""
    write_config(
        agent_dir,
        f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
        + telegram
        + server_toml()
        + server
        + RULE
        + APPROVALS,
    )
    return load_config(agent_dir / "bot.toml", env={**environment(tg, claude, log), **env})


def environment(
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    log: CallLog,
) -> dict[str, str]:
    """The variables a Telegram config with the notes server reads."""
    return {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": claude.base_url,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "NOTES_CALLS": str(log.path),
        "NOTES_TOKEN": "unused",
    }


def card_of(tg: FakeTelegram) -> Sent:  # noqa: F811
    [card] = [sent for sent in tg.sent if sent.buttons]
    return card


def current(tg: FakeTelegram, message_id: int) -> Sent:  # noqa: F811
    return next(sent for sent in tg.sent if sent.message_id == message_id)


def last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(block.get("text", "")) for block in content)


async def press(tg: FakeTelegram, sent: Sent, who: dict[str, Any], data: str) -> str:  # noqa: F811
    before = len(tg.answers)
    await tg.push(tg.press(sent, who, data))
    await tg.wait_for(lambda: len(tg.answers) > before)
    return tg.answers[before]["text"]


async def ask(app: App, tg: FakeTelegram, alice: dict[str, Any], chat: dict[str, Any]) -> Sent:  # noqa: F811
    await tg.push(tg.message(chat, alice, "delete the milk note"))
    await tg.wait_for(lambda: any(sent.buttons for sent in tg.sent))
    await tg.wait_sent(2)  # the card and the answer saying it waits
    await app.host.idle()
    return card_of(tg)


async def test_the_approver_runs_the_call_once_and_others_change_nothing(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    eve = tg.user("Eve", "Ng", "eve", user_id=99)
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.", "The milk note is gone.")
    async with App(config(agent_dir, tg, claude, call_log)) as app:
        card = await ask(app, tg, alice, chat)
        assert '{"text":"milk"}' in card.plain
        assert "notes__delete" in card.plain
        approve, deny = (data for _, data in card.buttons)
        assert approve.startswith("ap:a:")
        assert deny.startswith("ap:d:")
        assert await press(tg, card, alice, approve) == replies.APPROVAL_OWN_REQUEST
        assert await press(tg, card, eve, approve) == replies.APPROVAL_NOT_YOURS
        assert await press(tg, card, eve, "ap:a:" + "A" * 24) == replies.APPROVAL_UNKNOWN
        assert await press(tg, card, bob, "not ours at all") == replies.APPROVAL_UNKNOWN
        assert "delete" not in call_log.tools()
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        assert await press(tg, card, bob, deny) == replies.approval_already("approved")
        assert await press(tg, card, bob, approve) == replies.approval_already("approved")
        assert app.approvals is not None
        [listed] = await app.approvals.listing()
        asked = await app.store.records.show(listed.turn_id)
    assert asked is not None
    [waiting] = asked["details"]["tool_calls"]
    assert waiting["outcome"] == "waiting_approval"
    assert waiting["approval_id"] == listed.id
    # The asking turn was answered and suspended; its continuation came back as its own turn.
    assert asked["outcome"] == "suspended"
    assert asked["details"]["suspended"] == [{"kind": "approval", "key": listed.id}]
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [("delete", {"text": "milk"})]
    # The first answer's tool result said it waits; the continuation's note carries the outcome.
    assert "NOT run" in json.dumps(claude.requests[1]["messages"][-1]["content"])
    note = last_user_text(claude.requests[2])
    assert "approved" in note
    assert "deleted 0 note(s)" in note
    assert '{"text":"milk"}' in note
    assert "4242" not in json.dumps(claude.requests)  # the model never sees a platform id
    closed = current(tg, card.message_id)
    assert not closed.buttons
    assert "approved by telegram:4242" in closed.plain
    assert any("The milk note is gone." in sent.plain for sent in tg.sent)
    assert listed.state == "approved"
    assert listed.decided_by == "telegram:4242"
    # The tool's result reached the model in a host note, never long-term memory.
    with sqlite3.connect(agent_dir / "data" / "bot.sqlite3") as db:
        remembered = [text for (text,) in db.execute("SELECT text FROM memories")]
    assert any("delete the milk note" in text for text in remembered)
    assert not any("deleted 0 note(s)" in text for text in remembered)


async def test_deny_and_expiry_never_run_the_call_and_the_model_is_told_why(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    clock = Clock(1_800_000_000.0)  # moved by hand: expiry without sleeping
    claude.script(
        Reply(tool_calls=[DELETE]),
        "It waits.",
        "Denied, so nothing was deleted.",
        Reply(tool_calls=[DELETE]),
        "It waits again.",
        "Nobody decided in time.",
    )
    async with App(config(agent_dir, tg, claude, call_log), clock=clock) as app:
        assert app.approvals is not None
        card = await ask(app, tg, alice, chat)
        _, deny = (data for _, data in card.buttons)
        assert await press(tg, card, bob, deny) == replies.approval_recorded("denied")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        await tg.push(tg.message(chat, alice, "try again"))
        await until(lambda: len(claude.requests) >= 5)
        await app.host.idle()
        assert await app.approvals.expire_due() == 0  # not yet due
        clock.now += 31 * 60
        assert await app.approvals.expire_due() == 1
        await until(lambda: len(claude.requests) >= 6)
        await app.host.idle()
        states = sorted(a.state for a in await app.approvals.listing())
    assert "delete" not in call_log.tools()
    assert "denied by an approver" in last_user_text(claude.requests[2])
    assert "expired" in last_user_text(claude.requests[5])
    assert states == ["denied", "expired"]


async def test_a_restart_while_pending_then_approval_continues_once(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.", "Done after the restart.")
    settings = config(agent_dir, tg, claude, call_log)
    async with App(settings) as app:
        card = await ask(app, tg, alice, chat)
    approve, _ = (data for _, data in card.buttons)
    async with App(settings) as app:
        assert app.approvals is not None
        [pending] = await app.approvals.listing(pending=True)
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        assert await press(tg, card, bob, approve) == replies.approval_already("approved")
    assert [c["tool"] for c in call_log.calls()] == ["delete"]
    assert pending.tool == "notes__delete"
    assert any("Done after the restart." in sent.plain for sent in tg.sent)


async def test_arguments_changed_after_the_card_never_run_and_the_operator_sees_it_all(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, bob, chat = people(tg)
    clock = Clock(1_800_000_000.0)  # moved by hand: expiry without sleeping
    claude.script(Reply(tool_calls=[DELETE]), "It waits.", "It did not run.")
    settings = config(agent_dir, tg, claude, call_log)
    async with App(settings, clock=clock) as app:
        card = await ask(app, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        # Someone with write access to the store swaps the arguments after the card was shown.
        with sqlite3.connect(agent_dir / "data" / "bot.sqlite3") as db:
            db.execute("UPDATE approvals SET arguments = ?", ('{"text":"everything"}',))
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        metrics = app.metrics.render().decode()
    assert "delete" not in call_log.tools()
    assert replies.APPROVAL_TAMPERED in last_user_text(claude.requests[2])
    assert 'bot_approvals_total{event="requested"} 1.0' in metrics
    assert 'bot_approvals_total{event="approved"} 1.0' in metrics
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "TELEGRAM_BOT_TOKEN": tg.token,
        "NOTES_CALLS": str(call_log.path),
        "NOTES_TOKEN": "unused",
    }.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert (
        await asyncio.to_thread(main, ["approvals", "--config", str(agent_dir / "bot.toml")]) == 0
    )
    listed = capsys.readouterr().out
    assert "approved" in listed
    assert "notes__delete" in listed
    assert "telegram:4242" in listed
    assert (
        await asyncio.to_thread(
            main, ["approvals", "--pending", "--config", str(agent_dir / "bot.toml")]
        )
        == 0
    )
    assert "No pending approvals." in capsys.readouterr().out
    assert (
        await asyncio.to_thread(
            main, ["approvals", "--json", "--config", str(agent_dir / "bot.toml")]
        )
        == 0
    )
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["state"] == "approved"
    assert shown["requester"] == "telegram:42"


async def test_a_press_after_the_expiry_is_an_expiry(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    clock = Clock(1_800_000_000.0)  # moved by hand: expiry without sleeping
    claude.script(Reply(tool_calls=[DELETE]), "It waits.", "Too late: not done.")
    async with App(config(agent_dir, tg, claude, call_log), clock=clock) as app:
        card = await ask(app, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        clock.now += 30 * 60
        assert await press(tg, card, bob, approve) == replies.approval_already("expired")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
    assert "delete" not in call_log.tools()
    assert "expired" in last_user_text(claude.requests[2])


async def test_presses_arrive_over_the_webhook_too(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    secret = "s3cret-token_for-tests"
    claude.script(Reply(tool_calls=[DELETE]), "It waits.", "Deleted via the webhook.")
    settings = config(
        agent_dir,
        tg,
        claude,
        call_log,
        'mode = "webhook"\nwebhook_url = "https://bot.example/telegram/webhook"\n',
        BOT_HTTP__ENABLED="true",
        BOT_HTTP__PORT="0",
        TELEGRAM_WEBHOOK_SECRET=secret,
    )
    async with App(settings) as app:
        tg.webhook = {
            "url": f"http://127.0.0.1:{app.http_port}/telegram/webhook",
            "secret_token": secret,
        }
        card = await ask(app, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        assert await press(tg, card, alice, approve) == replies.APPROVAL_OWN_REQUEST
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
    assert [c["tool"] for c in call_log.calls()] == ["delete"]
    assert any("Deleted via the webhook." in sent.plain for sent in tg.sent)
    assert "getUpdates" not in {c.method for c in tg.calls}


async def test_the_approved_call_runs_in_the_lane_after_the_turn_queued_before_it(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    claude.script(
        Reply(tool_calls=[DELETE]), "It waits for approval.", "Your list is empty.", "Deleted."
    )
    async with App(config(agent_dir, tg, claude, call_log)) as app:
        card = await ask(app, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        claude.hold()  # Alice's next turn is running (its model call held) when Bob decides
        await tg.push(tg.message(chat, alice, "and what is on my list?"))
        await until(lambda: len(claude.requests) == 3)
        before = len(tg.answers)
        for _ in range(2):  # a double press: one decides, the other changes nothing
            await tg.push(tg.press(card, bob, approve))
        await tg.wait_for(lambda: len(tg.answers) == before + 2)
        answers = sorted(answer["text"] for answer in tg.answers[before:])
        queued = [item.request.continues for item in await app.store.inbox.pending()]
        ran_while_queued = "delete" in call_log.tools()
        claude.release()
        await until(lambda: len(claude.requests) >= 4)
        await app.host.idle()
        assert app.approvals is not None
        [decided] = await app.approvals.listing()
    assert answers == sorted(
        [replies.approval_recorded("approved"), replies.approval_already("approved")]
    )
    # Decided and queued behind the running turn; nothing ran at decision time.
    assert queued == [None, Continuation("approval", decided.id)]
    assert not ran_while_queued
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [("delete", {"text": "milk"})]
    assert "deleted" not in json.dumps(claude.requests[2])
    continued = claude.requests[3]
    assert "Your list is empty." in json.dumps(continued["messages"][:-1])  # history, in order
    assert "deleted 0 note(s)" in last_user_text(continued)
    assert any("Deleted." in sent.plain for sent in tg.sent)
    assert decided.result is not None
    assert "deleted 0 note(s)" in decided.result


async def test_a_restart_during_the_approved_call_never_runs_it_again(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    alice, bob, chat = people(tg)
    hang = ToolCall("notes__sleep", {"seconds": 600})
    claude.script(Reply(tool_calls=[hang]), "It waits.", "I cannot tell whether it ran.")
    settings = config(
        agent_dir,
        tg,
        claude,
        call_log,
        server='approve = ["sleep"]\n',
        BOT_HOST__SHUTDOWN_GRACE="0",  # leaving cancels the call under way at once
    )
    async with App(settings) as app:
        card = await ask(app, tg, alice, chat)
        approve, _ = (data for _, data in card.buttons)
        assert await press(tg, card, bob, approve) == replies.approval_recorded("approved")
        await until(lambda: "sleep" in call_log.tools())  # the call is under way: stop now
        assert app.approvals is not None
        [running] = await app.approvals.listing()
    async with App(settings) as app:
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        assert app.approvals is not None
        [after] = await app.approvals.listing()
    assert running.running_at is not None
    assert running.result is None
    assert call_log.tools() == ["sleep"]  # at most once
    assert "whether it ran is not known" in last_user_text(claude.requests[2])
    assert after.result == replies.APPROVAL_INTERRUPTED
    assert any("I cannot tell whether it ran." in sent.plain for sent in tg.sent)
