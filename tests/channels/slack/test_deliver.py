"""The Slack deliverer against the fake Slack Web API, through the real slack-sdk client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.turns import ReplyRoute
from channels.slack.deliver import MAX_ATTEMPTS, SlackDeliverer
from channels.slack.split import MESSAGE_BUDGET, is_fence
from tests.channels.slack.conftest import DM, GENERAL
from tests.fakes.slack import BOT_USER, FakeSlack


class Sleeps:
    """Records the waits the deliverer asks for instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def deliverer(slack: FakeSlack, sleeps: Sleeps) -> AsyncIterator[SlackDeliverer]:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    deliverer = SlackDeliverer(client, reaction="eyes", sleep=sleeps)
    yield deliverer
    await deliverer.aclose()


def thread_route(thread: str = "1700000001.000100") -> ReplyRoute:
    return ReplyRoute(
        "slack",
        {"channel": GENERAL, "thread_ts": thread, "message_ts": thread, "user": "U0ALICE01"},
    )


def long_answer(paragraphs: int = 10) -> str:
    paragraph = ("word " * 179).strip()  # 899 characters
    return "\n\n".join(f"{i} {paragraph}" for i in range(paragraphs))


async def test_a_short_answer_is_one_mrkdwn_post_in_the_thread(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    report = await deliverer.post_text(thread_route(), "**Done** & <dusted>", notice_id="n")
    assert report.delivered
    [post] = slack.posts
    assert (post["channel"], post["text"], post["thread_ts"]) == (
        GENERAL,
        "*Done* &amp; &lt;dusted&gt;",
        "1700000001.000100",
    )


async def test_a_long_dm_answer_starts_at_top_level_and_continues_in_its_thread(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    route = ReplyRoute("slack", {"channel": DM, "thread_ts": None, "message_ts": "1.0"})
    report = await deliverer.post_text(route, long_answer(), notice_id="n")
    assert (report.parts, report.accepted) == (3, 3)
    first, *rest = slack.posts
    assert first["thread_ts"] is None
    assert [post["thread_ts"] for post in rest] == [first["ts"], first["ts"]]


async def test_a_429_on_the_second_part_waits_then_keeps_order(
    slack: FakeSlack, deliverer: SlackDeliverer, sleeps: Sleeps
) -> None:
    slack.fail("chat.postMessage", status=429, retry_after=7, after=1)
    report = await deliverer.post_text(thread_route(), long_answer(), notice_id="n")
    assert report.delivered
    assert sleeps.waits == [7.0]
    assert "\n\n".join(post["text"] for post in slack.posts) == long_answer()
    statuses = [call.status for call in slack.calls if call.method == "chat.postMessage"]
    assert statuses == [200, 429, 200, 200]


async def test_transient_errors_are_retried_with_backoff(
    slack: FakeSlack, deliverer: SlackDeliverer, sleeps: Sleeps
) -> None:
    message = slack.say(GENERAL, "U0ALICE01", f"<@{BOT_USER}> hi")  # a thread to look in
    slack.fail("chat.postMessage", "internal_error", times=1)
    slack.fail("chat.postMessage", "service_unavailable", status=503, times=1)
    report = await deliverer.post_text(thread_route(message["ts"]), "hello", notice_id="n")
    assert report.delivered
    assert sleeps.waits == [0.5, 1.0]


async def test_retries_are_bounded(
    slack: FakeSlack, deliverer: SlackDeliverer, sleeps: Sleeps
) -> None:
    slack.fail("chat.postMessage", status=429, retry_after=1, times=100)
    report = await deliverer.post_text(thread_route(), "hello", notice_id="n")
    assert not report.delivered
    assert report.error is not None
    assert "after 5 attempts" in report.error
    assert len(sleeps.waits) == MAX_ATTEMPTS - 1
    assert slack.posts == []


async def test_a_permanent_error_stops_the_rest_and_reports_honestly(
    slack: FakeSlack, deliverer: SlackDeliverer, sleeps: Sleeps
) -> None:
    slack.fail("chat.postMessage", "not_in_channel", after=1)
    report = await deliverer.post_text(thread_route(), long_answer(), notice_id="n")
    assert (report.parts, report.accepted, report.delivered) == (3, 1, False)
    assert report.error == "chat.postMessage failed: not_in_channel"
    assert len(slack.posts) == 1
    assert sleeps.waits == []


async def test_parts_keep_code_blocks_balanced(slack: FakeSlack, deliverer: SlackDeliverer) -> None:
    code = "\n".join(f"print({i})  # {'x' * 40}" for i in range(200))
    await deliverer.post_text(
        thread_route(), f"Script:\n\n```python\n{code}\n```\n\nThat is all.", notice_id="n"
    )
    assert len(slack.posts) >= 3
    for post in slack.posts:
        assert len(post["text"]) <= MESSAGE_BUDGET
        assert sum(1 for line in post["text"].split("\n") if is_fence(line)) % 2 == 0


async def test_scheduled_posts_go_to_the_channel_top_level(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    report = await deliverer.post_text(deliverer.route_to(GENERAL), "Good morning", notice_id="n")
    assert report.delivered
    assert slack.posts[0]["thread_ts"] is None


async def test_a_route_without_channel_is_reported_not_raised(deliverer: SlackDeliverer) -> None:
    report = await deliverer.post_text(ReplyRoute("slack", {}), "hello", notice_id="n")
    assert not report.delivered


async def test_working_adds_a_reaction_and_removes_it_after(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    message = slack.say(GENERAL, "U0ALICE01", f"<@{BOT_USER}> hi")
    route = thread_route(message["ts"])
    async with deliverer.working(route):
        await slack.wait_for(lambda: slack.reactions)
        assert slack.reactions == [("add", GENERAL, message["ts"], "eyes")]
    await slack.wait_for(lambda: len(slack.reactions) == 2)
    assert slack.reactions[1] == ("remove", GENERAL, message["ts"], "eyes")


async def test_a_failing_reaction_never_fails_the_turn(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    slack.fail("reactions.add", "missing_scope")
    async with deliverer.working(thread_route()):
        pass
    await deliverer.aclose()
    assert slack.reactions == []
    assert [call.method for call in slack.calls] == ["reactions.add"]


async def test_working_on_a_route_without_a_message_does_nothing(
    slack: FakeSlack, deliverer: SlackDeliverer
) -> None:
    async with deliverer.working(deliverer.route_to(GENERAL)):
        pass
    await deliverer.aclose()
    assert slack.calls == []


async def test_an_empty_answer_posts_nothing(slack: FakeSlack, deliverer: SlackDeliverer) -> None:
    report = await deliverer.post_text(thread_route(), "  \n\n ", notice_id="n")
    assert (report.parts, report.accepted) == (0, 0)
    assert slack.calls == []
