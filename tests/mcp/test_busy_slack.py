"""Busy modes in a Slack thread (SPEC §19), end to end: the whole App with the Slack fake, the
model behind the Anthropic fake and a real MCP tool (the notes server's `wait`) held open on a
named pipe until the second message is stored, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from bot.cli.compose import App
from bot.ports.outbox import InboxState
from bot.store.sqlite import open_store
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import slack_channel
from tests.conftest import subprocess_env
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import TEAM, FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, server_toml
from tests.waiting import GUARD, until
from tests.warmbot.bots import Bots


def busy_rule(mode: str) -> str:
    return (
        f'\n[[surfaces]]\nplatform = "slack"\nid = "{GENERAL}"\ntools = ["notes__*"]\n'
        f'busy = "{mode}"\n'
    )


def release(pipe: Path, line: str = "go") -> asyncio.Future[None]:
    """Write one line to the held tool's pipe (opening it waits for the tool to read)."""

    def write() -> None:
        with open(pipe, "w", encoding="utf-8") as out:
            out.write(line + "\n")

    return asyncio.ensure_future(asyncio.to_thread(write))


def user_texts(message: dict[str, Any]) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


async def held_turn(slack: FakeSlack, app: App, call_log: CallLog, text: str) -> dict[str, Any]:
    """Mention the bot in the channel and return once its turn's tool call is running."""
    first = slack.mention(GENERAL, ALICE, text)
    await slack.acked(await slack.push(first))
    await until(lambda: "wait" in call_log.tools(), state=call_log.calls)
    return first


async def follow_up(slack: FakeSlack, app: App, thread: str, text: str, user: str = BOB) -> None:
    """A second mention in the same thread, stored in the inbox (acknowledged) before return."""
    await slack.acked(await slack.push(slack.mention(GENERAL, user, text, thread_ts=thread)))
    await slack_channel(app).drain()


async def test_steer_a_message_sent_while_a_tool_runs_joins_the_next_round_and_is_answered_once(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    hold: Path,
) -> None:
    pipe = hold
    claude.script(
        Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)})]),
        "Prod and staging both look fine.",
    )
    async with App(make_mcp_config(server_toml() + busy_rule("steer"))) as app:
        first = await held_turn(slack, app, call_log, "check the prod cluster")
        thread = first["event"]["ts"]
        await follow_up(slack, app, thread, "also check the staging cluster")
        await release(pipe)
        await app.host.idle()
        key = f"slack:{TEAM}:{GENERAL}:{thread}"
        history = await app.store.history.load(key)
        records = await app.store.records.recent(key, limit=5)
        states = [await app.store.inbox.state(i) for i in (1, 2)]
        consumed_by = await app.store.inbox.consumed_by(2)
        record = await app.store.records.show(records[0].turn_id)
    # One turn, two model rounds: the second carries the tool's result, then Bob's words.
    assert len(claude.requests) == 2
    last = claude.requests[1]["messages"][-1]
    assert last["content"][0]["type"] == "tool_result"
    [said] = user_texts(last)
    assert said.startswith("<speaker>")
    assert "also check the staging cluster" in said
    assert "check the prod cluster" not in json.dumps(claude.requests[1]["messages"][-1])
    # Answered once, in the thread; the steered message has no turn of its own.
    assert [p["text"] for p in slack.posts] == ["Prod and staging both look fine."]
    assert [r.outcome for r in records] == ["ok"]
    assert states == [InboxState.ANSWERED, InboxState.CONSUMED]
    assert consumed_by == records[0].turn_id
    assert record is not None
    assert record["details"]["took_in"] == 1
    # History keeps Bob's words where they came, under his name.
    assert [(e.role, e.speaker is not None) for e in history] == [
        ("user", True),
        ("assistant", False),
        ("user", False),
        ("user", True),
        ("assistant", False),
    ]
    assert history[3].text == "also check the staging cluster"
    assert history[3].speaker != history[0].speaker


async def test_queue_is_the_default_a_message_sent_meanwhile_gets_its_own_turn(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    hold: Path,
) -> None:
    pipe = hold
    claude.script(
        Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)})]),
        "Prod is fine.",
        "Staging is fine too.",
    )
    rule = busy_rule("queue").replace('busy = "queue"\n', "")
    async with App(make_mcp_config(server_toml() + rule)) as app:
        first = await held_turn(slack, app, call_log, "check the prod cluster")
        await follow_up(slack, app, first["event"]["ts"], "also check the staging cluster")
        await release(pipe)
        await app.host.idle()
    assert len(claude.requests) == 3
    assert "staging" not in json.dumps(claude.requests[1]["messages"])
    assert [p["text"] for p in slack.posts] == ["Prod is fine.", "Staging is fine too."]


async def test_interrupt_a_newer_message_stops_the_running_turn_and_is_answered(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    hold: Path,
) -> None:
    pipe = hold
    claude.script(
        Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)})]),
        "Staging is fine.",
    )
    async with App(make_mcp_config(server_toml() + busy_rule("interrupt"))) as app:
        first = await held_turn(slack, app, call_log, "check the prod cluster")
        thread = first["event"]["ts"]
        await follow_up(slack, app, thread, "no, check staging instead", user=ALICE)
        await slack.wait_for(lambda: len(slack.posts) == 2)
        await release(pipe)  # the abandoned call finishes on the server; nobody reads it
        await app.host.idle()
        key = f"slack:{TEAM}:{GENERAL}:{thread}"
        history = await app.store.history.load(key)
        states = [await app.store.inbox.state(i) for i in (1, 2)]
    stopped, answer = slack.posts
    assert stopped["text"] == "(Stopped to take your newer message.)"
    assert answer["text"] == "Staging is fine."
    assert states == [InboxState.STOPPED, InboxState.ANSWERED]
    assert len(claude.requests) == 2
    # The interrupted turn's account is in history, and the next request reads it.
    assert "a newer message interrupted it" in history[1].text
    assert "a newer message interrupted it" in json.dumps(claude.requests[1]["messages"])
    assert "no, check staging instead" in json.dumps(claude.requests[1]["messages"][-1])


async def test_collect_every_message_sent_meanwhile_goes_into_one_next_turn(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    hold: Path,
) -> None:
    pipe = hold
    claude.script(
        Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)})]),
        "Prod is fine.",
        "Staging and the queue are fine.",
    )
    async with App(make_mcp_config(server_toml() + busy_rule("collect"))) as app:
        first = await held_turn(slack, app, call_log, "check the prod cluster")
        thread = first["event"]["ts"]
        await follow_up(slack, app, thread, "also check staging")
        await follow_up(slack, app, thread, "and the job queue", user=ALICE)
        await release(pipe)
        await app.host.idle()
        states = [await app.store.inbox.state(i) for i in (1, 2, 3)]
        consumed_by = await app.store.inbox.consumed_by(3)
        [latest, _] = await app.store.records.recent(f"slack:{TEAM}:{GENERAL}:{thread}", limit=5)
    # The running turn saw neither; the next one both, in the order they came.
    assert len(claude.requests) == 3
    assert "staging" not in json.dumps(claude.requests[1]["messages"])
    said = user_texts(claude.requests[2]["messages"][-1])
    assert "also check staging" in said[0]
    assert said[1].startswith("<speaker>")
    assert "and the job queue" in said[1]
    assert [p["text"] for p in slack.posts] == ["Prod is fine.", "Staging and the queue are fine."]
    assert states == [InboxState.ANSWERED, InboxState.ANSWERED, InboxState.CONSUMED]
    assert consumed_by == latest.turn_id


async def test_steer_across_a_sigkill_the_steered_message_is_answered_once(
    bot_command: list[str],
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    agent_dir: Path,
    hold: Path,
) -> None:
    """`bot run` killed while the turn's second round (with the steered message) is at the
    model: nothing was published, so after the restart both messages are pending again, and the
    rerun turn takes the second in at once and answers both, once."""
    pipe = hold
    asked: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> Reply | str:
        asked.append(body)
        if len(asked) == 1:
            return Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)})])
        return "Prod and staging both look fine."

    claude.respond_with(respond)
    config = make_mcp_config(server_toml() + busy_rule("steer"))
    env = subprocess_env(
        ANTHROPIC_API_KEY="sk-ant-test-key-0123456789",
        ANTHROPIC_BASE_URL=claude.base_url,
        SLACK_BOT_TOKEN=slack.bot_token,
        SLACK_APP_TOKEN=slack.app_token,
        NOTES_CALLS=str(call_log.path),
    )
    run = ("--config", str(agent_dir / "bot.toml"), "run")
    async with Bots(bot_command, env) as bots:
        bot = await bots.start(*run)
        first = slack.mention(GENERAL, ALICE, "check the prod cluster")
        thread = first["event"]["ts"]
        await slack.acked(await slack.push(first))
        await until(lambda: "wait" in call_log.tools(), state=call_log.calls)
        later = slack.mention(GENERAL, BOB, "also check staging", thread_ts=thread)
        await slack.acked(await slack.push(later))
        claude.hold()  # the second round reaches the model and waits there
        await release(pipe)
        await until(lambda: len(claude.requests) == 2)
        assert "also check staging" in json.dumps(claude.requests[1]["messages"][-1])
        assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL
        claude.release()
        bot = await bots.start(*run)
        await slack.wait_for(lambda: len(slack.posts) == 1, within=GUARD)
        assert await bot.stop(signal.SIGTERM) == 0
    rerun = json.dumps(claude.requests[-1]["messages"][-1])
    assert "check the prod cluster" in rerun
    assert "also check staging" in rerun
    assert [p["text"] for p in slack.posts] == ["Prod and staging both look fine."]
    store = await open_store(config.settings.store, config.settings.memory)
    try:
        states = [await store.inbox.state(i) for i in (1, 2)]
        consumed_by = await store.inbox.consumed_by(2)
        [record] = await store.records.recent(limit=5)
    finally:
        await store.aclose()
    assert states == [InboxState.ANSWERED, InboxState.CONSUMED]
    assert consumed_by == record.turn_id
