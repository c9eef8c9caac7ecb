"""Slack streaming end to end (issue 15): the whole App, slack-bolt and slack-sdk against the fake
Slack, the model behind the fake Anthropic API writing its answer slowly (`claude.pace`).

What a person finally sees must be exactly the answer's non-streamed render (mrkdwn, split at the
budget, code blocks closed and reopened), in order, in the thread, each part once; while it is
written, the answer shows in Slack's own streams (a thread) or in an edited post (a DM's top
level), and the progress reaction comes off as soon as the first text shows.
"""

from __future__ import annotations

from structlog.testing import capture_logs

from bot.cli.compose import App
from channels.slack.deliver import SlackDeliverer
from channels.slack.split import MESSAGE_BUDGET
from tests.channels.slack.conftest import ALICE, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send, settle
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack

PACE = 0.002  # seconds between the model's text deltas
WORDS = 30  # words per delta
FAST = "stream_interval = 0\n"  # no real waiting between updates in tests


def long_answer() -> str:
    """About 9,000 characters of Markdown: paragraphs, a list and a long code block, so the
    split falls inside a code block and a list at least once."""
    para = "Streaming **keeps** people reading while the `model` writes. " * 12
    items = "\n".join(f"- item {n}: *emphasis*, [link](https://example.com/{n})" for n in range(40))
    code = "\n".join(f"line_{n} = compute({n})  # a comment" for n in range(90))
    return f"{para}\n\n{items}\n\n```python\n{code}\n```\n\n{para}\n\n## The end\n\nDone."


def expected(slack: FakeSlack, text: str) -> list[str]:
    return SlackDeliverer(client=None, stream="off").render(None, text)  # type: ignore[arg-type]


def methods(slack: FakeSlack, prefix: str = "chat.") -> list[str]:
    return [call.method for call in slack.calls if call.method.startswith(prefix)]


async def test_a_long_answer_streams_natively_and_ends_as_the_split_render(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    text = long_answer()
    claude.script(text)
    claude.pace, claude.words_per_delta = PACE, WORDS
    claude.hold_midway()  # until the first stream opens: a fast model could finish before it
    async with App(make_config(FAST)) as app:
        body = slack.mention(GENERAL, ALICE, "tell me everything")
        envelope = await slack.push(body)
        await slack.wait_for(lambda: "chat.startStream" in methods(slack))
        claude.release_midway()
        await settle(slack, app, envelope)
        await slack.wait_for(lambda: len(slack.reactions) == 2)
    ts = body["event"]["ts"]
    parts = expected(slack, text)
    assert len(parts) >= 3
    assert all(len(part) <= MESSAGE_BUDGET for part in parts)
    assert [post["text"] for post in slack.posts] == parts
    assert {post["thread_ts"] for post in slack.posts} == {ts}
    assert slack.posts[0].get("stream")  # and none was posted a second time
    used = methods(slack)
    # How many parts a stream reaches before the answer is done depends on the machine's load
    # (the rest are posted whole); that each part is opened once, and each stream finished,
    # does not.
    streamed = used.count("chat.startStream")
    assert streamed >= 1
    assert "chat.appendStream" in used
    assert used.count("chat.postMessage") == len(parts) - streamed  # not reached
    assert used.count("chat.update") == streamed  # each stream finished with its final part
    # The reaction came off when the first text showed, long before the answer was finished.
    order = [call.method for call in slack.calls]
    assert order.index("reactions.remove") < order.index("chat.stopStream")
    # Every stream was stopped; the recipient ids Slack asks for went with each start.
    starts = [call.params for call in slack.calls if call.method == "chat.startStream"]
    assert all(p["recipient_user_id"] == ALICE and p["recipient_team_id"] for p in starts)
    assert not any(m.get("streaming") for m in slack.messages[GENERAL])


async def test_a_dm_top_level_answer_streams_as_an_edited_post(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    text = long_answer()
    claude.script(text)
    claude.pace, claude.words_per_delta = PACE, WORDS
    claude.hold_midway()  # until the first part shows: then the stream has surely begun
    async with App(make_config(FAST)) as app:
        envelope = await slack.push(slack.dm(DM, ALICE, "tell me everything"))
        await slack.wait_for(lambda: "chat.postMessage" in methods(slack))
        claude.release_midway()
        await settle(slack, app, envelope)
    parts = expected(slack, text)
    posts = slack.bot_messages(DM)
    assert [post["text"] for post in posts] == parts
    assert posts[0]["thread_ts"] is None
    assert {post["thread_ts"] for post in posts[1:]} == {posts[0]["ts"]}
    # Slack streams only in threads: the first part is a post that is edited, the rest stream
    # in the thread under it (or, those the stream did not reach before the answer was done,
    # are posted there: how far a stream gets depends on timing, what is shown does not).
    calls = [call for call in slack.calls if call.method.startswith("chat.")]
    top = [c for c in calls if c.method == "chat.postMessage" and not c.params.get("thread_ts")]
    assert len(top) == 1
    threaded = [c for c in calls if c.method in ("chat.startStream", "chat.postMessage")]
    assert len(threaded) == len(parts)  # each part opened once: one post, the rest in the thread
    updates = [c for c in calls if c.method == "chat.update"]
    assert any(c.params["ts"] == posts[0]["ts"] for c in updates)  # the first post was edited


async def test_edits_mode_and_off_mode(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    text = long_answer()
    parts = expected(slack, text)
    claude.pace, claude.words_per_delta = PACE, WORDS
    claude.script(text)
    async with App(make_config(FAST + 'stream = "edits"\n')) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "edits please"))
    assert [post["text"] for post in slack.posts] == parts
    assert "chat.startStream" not in methods(slack)
    assert "chat.update" in methods(slack)
    slack.posts.clear()
    slack.calls.clear()
    claude.script(text)
    async with App(make_config('stream = "off"\n')) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "whole please"))
    assert [post["text"] for post in slack.posts] == parts
    assert methods(slack) == ["chat.postMessage"] * len(parts)


async def test_a_refused_stream_falls_back_to_a_normal_post_with_one_warning(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.streaming_enabled = False  # an app without the streaming methods
    text = "A short answer that **would** have streamed."
    claude.words_per_delta = 2
    claude.script(text, text)
    claude.hold_midway()  # the first answer surely tries to stream before it is done
    with capture_logs() as logs:
        async with App(make_config(FAST)) as app:
            first = await slack.push(slack.mention(GENERAL, ALICE, "first"))
            await slack.wait_for(lambda: "chat.startStream" in methods(slack))
            claude.release_midway()
            await settle(slack, app, first)
            await send(slack, app, slack.mention(GENERAL, ALICE, "second"))
    assert [post["text"] for post in slack.posts] == expected(slack, text) * 2
    assert methods(slack).count("chat.startStream") == 1  # refused once, not tried again
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == ["slack_stream_refused"]
    assert "Fix:" in warnings[0]["reason"]
    assert 'stream = "edits"' in warnings[0]["reason"]


async def test_a_rate_limited_stream_backs_off_and_the_answer_still_arrives_whole(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.limit("chat.appendStream", 60.0)  # one append per message a minute
    text = long_answer()
    claude.script(text)
    claude.pace, claude.words_per_delta = PACE, WORDS

    def appended() -> int:
        return sum(1 for c in slack.calls if c.method == "chat.appendStream")

    # One delta at a time until the first message got a second append (the refused one): a
    # fast model could otherwise finish before the stream appends twice to one message.
    claude.hold_step()
    async with App(make_config(FAST)) as app:
        envelope = await slack.push(slack.mention(GENERAL, ALICE, "go"))
        await slack.wait_for(lambda: "chat.startStream" in methods(slack))
        for count in (1, 2):
            claude.release_step()
            claude.hold_step()
            await slack.wait_for(lambda: appended() >= count)  # noqa: B023 (awaited here)
        claude.release_step()
        await settle(slack, app, envelope)
    assert [post["text"] for post in slack.posts] == expected(slack, text)
    limited = [c for c in slack.calls if c.method == "chat.appendStream" and c.status == 429]
    assert limited  # it was told to wait, and waited (no append in a burst after the 429)
    appends = [c for c in slack.calls if c.method == "chat.appendStream"]
    after = appends[appends.index(limited[0]) + 1 :]
    assert all(c.params["ts"] != limited[0].params["ts"] for c in after)


async def test_a_turn_that_fails_mid_stream_leaves_one_apology_and_removes_the_rest(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.pace, claude.words_per_delta = PACE, WORDS
    claude.fail_midstream("overloaded_error", partial=long_answer())
    async with App(make_config(FAST)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "tell me everything"))
    [apology] = slack.posts
    assert apology["text"].startswith("Sorry, I couldn't answer")
    assert apology.get("stream")  # the first streamed message, finished as the apology
    assert slack.deleted  # the rest of the partial answer is gone
    assert not any(m.get("streaming") for m in slack.messages[GENERAL])


async def test_a_finish_rate_limited_six_times_ends_as_the_final_answer_without_a_restart(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    text = "A **short** answer that streams, then is finished late."
    claude.script(text)
    claude.words_per_delta = 2
    claude.hold_midway()
    slack.fail("chat.update", status=429, retry_after=0.05, times=6)
    async with App(make_config(FAST)) as app:
        envelope = await slack.push(slack.mention(GENERAL, ALICE, "go"))
        await slack.wait_for(lambda: "chat.startStream" in methods(slack))
        claude.release_midway()
        await settle(slack, app, envelope)
        # Still the same process: the part was tried again in it until Slack took it.
        assert [post["text"] for post in slack.posts] == expected(slack, text)
        assert app.host is not None
    updates = [call for call in slack.calls if call.method == "chat.update"]
    assert [call.status for call in updates[:6]] == [429] * 6
    assert updates[-1].status == 200
    assert not any(m.get("streaming") for m in slack.messages[GENERAL])
