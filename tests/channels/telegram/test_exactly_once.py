"""Exactly once on Telegram through the whole App: python-telegram-bot polling the fake Bot API,
the real SQLite store, the model behind the fake Anthropic API.

Shutdown that cuts a turn short, a store that cannot write (a full disk: the database file capped
with SQLite's `max_page_count`, filled through the store's own ports), and the group buffer
around both. Waits are on conditions; the only clocks are the ones that turn a hang into a
failure.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.store.sqlite.full_disk import fill, make_room
from tests.waiting import until

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987
GROUP_ID = -1_002_233_445_566


def polled(tg: FakeTelegram) -> list[dict[str, object]]:
    """The parameters of every getUpdates call so far."""
    return [dict(call.params) for call in tg.calls if call.method == "getUpdates"]


def asked_from(tg: FakeTelegram, update_id: int, *, after: int) -> int:
    """How many getUpdates calls since the `after`-th asked from `update_id` on."""
    return sum(1 for call in polled(tg)[after:] if int(str(call.get("offset") or 0)) == update_id)


async def test_a_turn_cut_short_at_shutdown_is_answered_once_after_the_restart(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    config = make_config("\n[host]\nshutdown_grace = 0.1\n")
    claude.stall(30.0, times=1)
    async with App(config) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "a long question"))
        await until(lambda: claude.requests)  # the turn is in its model call
    # Cut short: nothing said, nothing in history, the message still waiting in the inbox.
    assert tg.sent == []
    claude.script("the answer")
    async with App(config) as app:
        await tg.wait_sent(1)
        await app.host.idle()
        history = await app.store.history.load(f"telegram:{ALICE_ID}")
        pending = await app.store.inbox.pending()
    assert [sent.plain for sent in tg.sent] == ["the answer"]
    assert [entry.text for entry in history] == ["a long question", "the answer"]
    assert pending == []


async def test_a_full_disk_confirms_no_update_and_loses_no_group_context(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.script("here is what happened")
    async with App(make_config()) as app:
        chatter = await tg.push(tg.message(group, alice, "the deploy on main is red again"))
        await until(lambda: chatter not in tg.pending_updates)  # kept and confirmed
        await fill(app.store)
        polls = len(polled(tg))
        mention = await tg.push(tg.message(group, alice, "what is going on?", mention=True))
        # Polled, not storable: Telegram keeps offering it, and nothing is answered.
        await until(lambda: asked_from(tg, mention, after=polls) >= 2)
        assert tg.pending_updates == [mention]
        assert tg.sent == []
        assert claude.requests == []
        await make_room(app.store)
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    assert tg.pending_updates == []
    assert answer.plain == "here is what happened"
    # The chatter kept before the full disk is still the mention's context.
    assert "the deploy on main is red again" in str(claude.requests[0]["messages"][-1])


async def test_a_publication_the_full_disk_refuses_is_retried_while_the_host_runs(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.hold()
    claude.script("worth the wait", "and the next one")
    with capture_logs() as logs:
        async with App(make_config()) as app:
            await tg.push(tg.message(tg.private_chat(alice), alice, "first"))
            await until(lambda: claude.requests)  # stored, and in its model call
            await fill(app.store)
            claude.release()
            await until(lambda: retries(logs) >= 2)  # the answer could not be published
            assert tg.sent == []
            await make_room(app.store)
            await tg.wait_sent(1)  # no restart needed
            await tg.push(tg.message(tg.private_chat(alice), alice, "second"))
            await tg.wait_sent(2)
            await app.host.idle()
            history = await app.store.history.load(f"telegram:{ALICE_ID}")
    assert [sent.plain for sent in tg.sent] == ["worth the wait", "and the next one"]
    assert [entry.text for entry in history] == [
        "first",
        "worth the wait",
        "second",
        "and the next one",
    ]


def retries(logs: list[dict[str, object]]) -> int:
    return sum(1 for line in logs if line.get("event") == "turn_publish_retrying")


async def test_a_batch_of_updates_is_taken_chat_by_chat_in_order_and_confirmed_together(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    people = [tg.user(f"P{i}", "Bench", f"p{i}", user_id=1_000 + i) for i in range(5)]
    claude.respond_with(lambda body: "seen")
    # Queued before the bot polls, so they arrive as one getUpdates batch.
    chatter = await tg.push(tg.message(group, alice, "the deploy on main is red again"))
    for person in people:
        await tg.push(tg.message(tg.private_chat(person), person, "hello"))
    mention = await tg.push(tg.message(group, alice, "what is going on?", mention=True))
    async with App(make_config()) as app:
        await tg.wait_sent(len(people) + 1)
        await app.host.idle()
        first = polled(tg)[0]
        later = [int(str(call.get("offset") or 0)) for call in polled(tg)[1:]]
    assert tg.pending_updates == []
    assert sorted(sent.chat_id for sent in tg.sent) == sorted(
        [GROUP_ID, *(int(p["id"]) for p in people)]
    )
    # The group's chatter was taken before its mention: the mention's context holds it.
    asked = [str(r["messages"][-1]) for r in claude.requests if "what is going on" in str(r)]
    assert len(asked) == 1
    assert "the deploy on main is red again" in asked[0]
    # The whole batch was confirmed at once: the next poll asked from past its last update.
    assert int(str(first.get("offset") or 0)) <= chatter
    assert later[:1] == [mention + 1]
