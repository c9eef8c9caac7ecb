"""Private approval cards (SPEC §14, `[approvals] where = "approver"`), end to end on Slack: the
card goes to the approver's DM (conversations.open, chat.postMessage), one line without the
arguments stays in the thread, and the approver's press in the DM runs the call once and the turn
goes on in the thread, in that conversation's order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli.compose import App
from bot.cli.settings import Config, load_config
from channels.slack.approvals import APPROVE_ACTION
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.channels.telegram.conftest import tg  # noqa: F401
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram, Sent
from tests.mcp.conftest import CallLog, MakeMcpConfig, rule_toml, server_toml
from tests.mcp.test_slack_approvals import buttons
from tests.mcp.test_telegram_approvals import environment
from tests.waiting import until

SECRET_WORDS = "payroll-file-of-ingrid-7731"
TELEGRAM = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
DELETE = ToolCall("notes__delete", {"text": SECRET_WORDS})
TOML = (
    server_toml()
    + rule_toml(GENERAL, ["notes__*"])
    + f'\n[approvals]\napprovers = ["slack:{BOB}"]\nwhere = "approver"\n'
)


async def test_the_card_goes_to_the_approvers_dm_and_the_press_there_runs_it_once(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    delete = ToolCall("notes__delete", {"text": SECRET_WORDS})
    claude.script(Reply(tool_calls=[delete]), "It waits for approval.", "Deleted.")
    async with App(make_mcp_config(TOML)) as app:
        mention = slack.mention(GENERAL, ALICE, "delete that note")
        await send(slack, app, mention)
        [card] = [post for post in slack.posts if post["blocks"]]
        posted = [dict(p) for p in slack.posts_in(GENERAL)]  # before anything is decided
        in_general = json.dumps(posted)
        shown = json.dumps(card["blocks"])
        envelope = await slack.push_interactive(
            slack.block_action(card, BOB, APPROVE_ACTION, buttons(card)[APPROVE_ACTION])
        )
        await slack.acked(envelope)
        await until(lambda: len(claude.requests) >= 3)
        await slack_channel(app).drain()
        await app.host.idle()
        await until(lambda: any(p["text"] == "Deleted." for p in slack.posts))
    dm = slack.dms[BOB]
    assert card["channel"] == dm
    assert slack.im_opened == [BOB]
    assert SECRET_WORDS in shown  # the approver sees what would run
    assert SECRET_WORDS not in in_general  # nobody in the channel does
    notice = [p for p in posted if "waiting for an approval" in p["text"]]
    assert [p["thread_ts"] for p in notice] == [mention["event"]["ts"]]
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [
        ("delete", {"text": SECRET_WORDS})
    ]
    [done] = [p for p in slack.posts if p["text"] == "Deleted."]
    assert (done["channel"], done["thread_ts"]) == (GENERAL, mention["event"]["ts"])
    closed = [p for p in slack.posts if p["ts"] == card["ts"] and p["channel"] == dm]
    assert closed
    assert not buttons(closed[-1])


def telegram_config(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    log: CallLog,
    approvers: str,
) -> Config:
    write_config(
        agent_dir,
        f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
        + server_toml()
        + '\n[[surfaces]]\nplatform = "telegram"\ntools = ["notes__*"]\n'
        + f'\n[approvals]\napprovers = {approvers}\nwhere = "approver"\n',
    )
    return load_config(agent_dir / "bot.toml", env=environment(tg, claude, log))


async def ask_in_group(app: App, tg: FakeTelegram) -> tuple[dict[str, Any], Sent]:  # noqa: F811
    alice = tg.user("Alice", "Chen", "alice", user_id=42)
    group = tg.supergroup(-1002233445566, "Team")
    await tg.push(tg.message(group, alice, "delete that note", mention=True))
    await tg.wait_for(lambda: any(sent.buttons for sent in tg.sent))
    await tg.wait_for(lambda: len(tg.sent_to(int(group["id"]))) >= 2)
    await app.host.idle()
    [card] = [sent for sent in tg.sent if sent.buttons]
    return group, card


@TELEGRAM
async def test_telegram_sends_the_card_to_an_approver_who_started_the_bot(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    bob = tg.user("Bob", "Ito", "bob", user_id=4242)
    tg.private_chat(bob)  # Bob has started the bot; approver 7 has not
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.", "Deleted.")
    config = telegram_config(agent_dir, tg, claude, call_log, '["telegram:7", "telegram:4242"]')
    async with App(config) as app:
        group, card = await ask_in_group(app, tg)
        in_group = [sent.plain for sent in tg.sent_to(int(group["id"]))]
        approve = card.buttons[0][1]
        before = len(tg.answers)
        await tg.push(tg.press(card, bob, approve))
        await tg.wait_for(lambda: len(tg.answers) > before)
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
        await tg.wait_for(lambda: any(s.plain == "Deleted." for s in tg.sent))
    assert card.chat_id == 4242
    assert SECRET_WORDS in card.plain
    assert not any(SECRET_WORDS in text for text in in_group)
    assert any("waiting for an approval" in text for text in in_group)
    assert [c["tool"] for c in call_log.calls()] == ["delete"]
    [done] = [s for s in tg.sent if s.plain == "Deleted."]
    assert done.chat_id == int(group["id"])


@TELEGRAM
async def test_telegram_hides_the_arguments_in_the_group_when_no_approver_can_be_reached(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    call_log: CallLog,
) -> None:
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.")
    config = telegram_config(agent_dir, tg, claude, call_log, '["telegram:4242"]')
    async with App(config) as app:
        group, card = await ask_in_group(app, tg)
    assert card.chat_id == int(group["id"])
    assert "notes__delete" in card.plain
    assert SECRET_WORDS not in card.plain
    assert "shown only to the approvers" in card.plain
    assert call_log.calls() == []
