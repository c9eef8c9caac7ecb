"""The deliverer through python-telegram-bot's real Bot against the fake Bot API."""

from __future__ import annotations

import asyncio

import pytest
from telegram import Bot

from bot.errors import RouteError
from channels.telegram.deliver import MAX_RATE_LIMIT_WAIT, Target, TelegramDeliverer, route_for
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, utf16_length
from tests.fakes.telegram import FakeTelegram, parse_html

# PTB's own RetryAfter constructor reads its deprecated int-valued property.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


class Waits:
    """A sleep that records what it was asked to wait, and only yields."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.sleep(0)


LONG_ANSWER = "\n\n".join(
    f"## Part {i} 🚀\n\nSome **bold 🎉** text, `code <x>` & a [link](https://example.com/{i}) 😀😀."
    for i in range(120)
)


async def test_dm_answer_is_html_without_reply(tg: FakeTelegram, bot: Bot) -> None:
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    report = await TelegramDeliverer(bot).post_text(
        route_for(Target(chat["id"])), "**hi** <there>", notice_id="n"
    )
    assert report.delivered
    [sent] = tg.sent
    assert (sent.text, sent.parse_mode, sent.reply_to) == ("<b>hi</b> &lt;there&gt;", "HTML", None)


async def test_group_answer_replies_with_its_first_part_only(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.supergroup(-1001, "Team")
    route = route_for(Target(chat["id"], reply_to=77))
    report = await TelegramDeliverer(bot).post_text(route, LONG_ANSWER, notice_id="n")
    assert report.delivered
    assert report.parts == len(tg.sent) > 1
    assert [s.reply_to for s in tg.sent] == [77] + [None] * (len(tg.sent) - 1)
    reply_call = next(c for c in tg.calls if c.method == "sendMessage")
    assert reply_call.params["reply_parameters"] == {
        "message_id": 77,
        "allow_sending_without_reply": True,
    }


async def test_long_answer_parts_fit_and_read_back_whole(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    await TelegramDeliverer(bot).post_text(
        route_for(Target(chat["id"])), LONG_ANSWER, notice_id="n"
    )
    assert len(tg.sent) >= 3
    for sent in tg.sent:
        assert utf16_length(sent.text) <= TELEGRAM_MESSAGE_LIMIT
        assert parse_html(sent.text) == sent.plain
    read = "".join(s.plain for s in tg.sent)
    assert read.count("🚀") == 120
    assert "Part 0" in read
    assert "Part 119" in read


async def test_topic_answers_stay_in_the_topic(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.supergroup(-1002, "Forum", forum=True)
    await TelegramDeliverer(bot).post_text(
        route_for(Target(chat["id"], 55, 9)), LONG_ANSWER, notice_id="n"
    )
    assert {s.thread_id for s in tg.sent} == {55}


async def test_entity_error_resends_that_part_as_plain_text(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    tg.entity_error()
    report = await TelegramDeliverer(bot).post_text(
        route_for(Target(chat["id"])), "**a** & <b>", notice_id="n"
    )
    assert report.delivered
    [sent] = tg.sent
    assert (sent.text, sent.parse_mode) == ("a & <b>", None)
    assert [c.method for c in tg.calls].count("sendMessage") == 2


async def test_rate_limit_waits_as_asked_and_continues_in_order(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    waits = Waits()
    deliverer = TelegramDeliverer(bot, sleep=waits)
    first = await deliverer.post_text(route_for(Target(chat["id"])), "one", notice_id="n")
    tg.rate_limit(3, times=2)
    second = await deliverer.post_text(route_for(Target(chat["id"])), LONG_ANSWER, notice_id="n")
    assert first.delivered
    assert second.delivered
    assert waits.asked == [3.0, 3.0]
    assert tg.sent[0].plain == "one"
    assert tg.sent[1].plain.startswith("Part 0")
    assert "Part 119" in tg.sent[-1].plain


async def test_flood_wait_beyond_the_bound_fails_honestly(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    tg.rate_limit(int(MAX_RATE_LIMIT_WAIT) + 1)
    waits = Waits()
    report = await TelegramDeliverer(bot, sleep=waits).post_text(
        route_for(Target(chat["id"])), "x", notice_id="n"
    )
    assert not report.delivered
    assert (report.parts, report.accepted) == (1, 0)
    assert report.error is not None
    assert report.error.startswith("Telegram flood control")
    assert waits.asked == []


async def test_a_refused_part_stops_delivery_and_says_how_far_it_got(
    tg: FakeTelegram, bot: Bot
) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    deliverer = TelegramDeliverer(bot)
    tg.fail("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    report = await deliverer.post_text(route_for(Target(chat["id"])), LONG_ANSWER, notice_id="n")
    assert (report.accepted, report.delivered) == (0, False)
    assert report.error == "Forbidden: Forbidden: bot was blocked by the user"
    assert tg.sent == []


async def test_migrated_group_is_followed_to_its_supergroup(tg: FakeTelegram, bot: Bot) -> None:
    old = tg.group(-400, "Old group")
    new = tg.supergroup(-100400, "Old group")
    tg.fail(
        "sendMessage",
        status=400,
        description="Bad Request: group chat was upgraded to a supergroup chat",
        parameters={"migrate_to_chat_id": new["id"]},
    )
    report = await TelegramDeliverer(bot).post_text(
        route_for(Target(old["id"])), "hello", notice_id="n"
    )
    assert report.delivered
    assert [s.chat_id for s in tg.sent] == [new["id"]]


async def test_typing_repeats_while_working_and_stops_after(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.supergroup(-1003, "Forum", forum=True)
    deliverer = TelegramDeliverer(bot, typing_interval=0.01)
    async with deliverer.working(route_for(Target(chat["id"], 12))):
        await tg.wait_for(lambda: len(tg.actions) >= 3)
    count = len(tg.actions)
    await asyncio.sleep(0.05)
    assert len(tg.actions) == count
    assert {(c.params["action"], c.params["message_thread_id"]) for c in tg.actions} == {
        ("typing", "12")
    }


async def test_typing_failures_do_not_fail_the_turn(tg: FakeTelegram, bot: Bot) -> None:
    chat = tg.private_chat(tg.user("Alice"))
    tg.fail("sendChatAction", status=400, description="Bad Request: not enough rights", times=2)
    deliverer = TelegramDeliverer(bot, typing_interval=0.01)
    async with deliverer.working(route_for(Target(chat["id"]))):
        # Two refused attempts do not stop it: it keeps trying, and the third is accepted.
        await tg.wait_for(lambda: len(tg.actions) >= 1)
    attempts = [call for call in tg.calls if call.method == "sendChatAction"]
    assert len(attempts) >= 3
    assert tg.actions[0].params["action"] == "typing"


def test_route_to_a_chat_or_a_topic(bot: Bot) -> None:
    deliverer = TelegramDeliverer(bot)
    assert deliverer.route_to("-1001234") == route_for(Target(-1001234))
    assert deliverer.route_to("-1001234:7") == route_for(Target(-1001234, 7))
    assert deliverer.route_to("telegram:42") == route_for(Target(42))
    with pytest.raises(RouteError, match="not '<chat id>'"):
        deliverer.route_to("@channelname")
