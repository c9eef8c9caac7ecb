"""Slack shows the agent's steps (issue 43): while a tool runs, the answer's native stream shows a
task per tool call (`task_update` chunks: the tool's name, in progress, then complete or error),
and the stream is finished with the answer. The whole App with the Slack fake, the model behind
the Anthropic fake and the notes server's `wait` tool held open on a named pipe."""

from __future__ import annotations

from pathlib import Path

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, server_toml
from tests.mcp.test_busy_slack import release
from tests.waiting import until

NATIVE = 'stream = "native"\nstream_interval = 0\n'
RULE = f'\n[[surfaces]]\nplatform = "slack"\nid = "{GENERAL}"\ntools = ["notes__*"]\n'


async def test_a_running_tool_shows_as_a_task_and_the_stream_ends_as_the_answer(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
    hold: Path,
) -> None:
    pipe = hold
    claude.script(
        Reply(tool_calls=[ToolCall("notes__wait", {"path": str(pipe)}, id="toolu_1")]),
        Reply(tool_calls=[ToolCall("notes__boom", {}, id="toolu_2")]),
        "All checked.",
    )
    async with App(make_mcp_config(NATIVE + server_toml() + RULE)) as app:
        body = slack.mention(GENERAL, ALICE, "check everything")
        await slack.acked(await slack.push(body))
        await until(lambda: "wait" in call_log.tools(), state=call_log.calls)
        # While the tool runs, the thread shows it as a task in progress.
        await slack.wait_for(lambda: "toolu_1" in str(slack.task_log))
        shown_while_running = list(slack.task_log)
        await release(pipe)
        await app.host.idle()
    [post] = slack.posts
    ts = post["ts"]
    assert post["thread_ts"] == body["event"]["ts"]
    assert shown_while_running == [(ts, "toolu_1", "in_progress")]
    assert slack.tasks[ts] == {
        "toolu_1": {"id": "toolu_1", "title": "notes__wait", "status": "complete"},
        "toolu_2": {"id": "toolu_2", "title": "notes__boom", "status": "error"},
    }
    assert post["text"] == "All checked."  # finished with the answer
    assert not any(m.get("streaming") for m in slack.messages[GENERAL])
    starts = [c.params for c in slack.calls if c.method == "chat.startStream"]
    assert len(starts) == 1
    assert starts[0]["task_display_mode"] == "timeline"


async def test_without_streaming_a_tool_turn_is_posted_whole_with_no_tasks(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    claude.script(Reply(tool_calls=[ToolCall("notes__search", {"query": "x"})]), "Nothing.")
    async with App(make_mcp_config(server_toml() + RULE)) as app:
        await slack.acked(await slack.push(slack.mention(GENERAL, ALICE, "find x")))
        await app.host.idle()
    assert [p["text"] for p in slack.posts] == ["Nothing."]
    assert slack.task_log == []


async def test_a_stream_that_refuses_the_tasks_still_streams_the_answer(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    slack.fail("chat.startStream", "invalid_chunks", times=1)  # an older Slack: no task chunks
    claude.script(Reply(tool_calls=[ToolCall("notes__search", {"query": "x"})]), "Nothing.")
    claude.hold_midway()  # the answer's stream opens for sure before it is done
    async with App(make_mcp_config(NATIVE + server_toml() + RULE)) as app:
        await slack.acked(await slack.push(slack.mention(GENERAL, ALICE, "find x")))
        await slack.wait_for(lambda: [c.method for c in slack.calls].count("chat.startStream") == 2)
        claude.release_midway()
        await app.host.idle()
    assert [p["text"] for p in slack.posts] == ["Nothing."]
    assert slack.task_log == []
    assert slack.posts[0].get("stream")
