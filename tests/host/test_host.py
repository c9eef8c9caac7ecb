"""The host pipeline end to end: lanes, publish, continuity accounts, refusals, shutdown.

Everything real except the model server: the composition root builds the SQLite store, the
assembler and the Anthropic runtime (the real SDK), pointed at the fake Messages API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from bot.cli.compose import App, ready
from bot.cli.settings import Config
from bot.ports.intake import Admission, TurnResult
from bot.turns import HistoryEntry, TextBlock
from tests.fakes.anthropic import OVERFLOW, FakeAnthropic, Reply
from tests.host.conftest import HOST_ONLY, console
from tests.waiting import until

MakeConfig = Callable[..., Config]


def _user_texts(body: dict[str, object]) -> list[str]:
    texts = []
    for message in body["messages"]:  # type: ignore[attr-defined]
        for block in message["content"]:
            if block.get("type") == "text":
                texts.append(block["text"])
    return texts


async def test_console_turns_publish_history_that_survives_a_restart(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    config = make_config()
    fake.script("first answer", "second answer")
    channel, out = console("demo", "hello there\nwhat did I say?\n")
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        await channel.finished()
    assert out.getvalue().splitlines() == ["first answer", "second answer"]

    async with App(config, [], HOST_ONLY) as app:
        history = await app.store.history.load("console:demo")
    assert [entry.role for entry in history] == ["user", "assistant"] * 2
    assert [entry.text for entry in history] == [
        "hello there",
        "first answer",
        "what did I say?",
        "second answer",
    ]
    # The second request replayed the first turn as structured history, exactly once.
    second = fake.requests[1]
    assert _user_texts(second).count("hello there") == 1
    assert second["messages"][1]["role"] == "assistant"
    assert second["messages"][1]["content"][0]["text"] == "first answer"


async def test_one_conversation_runs_strictly_in_order(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.stall(0.05, times=3)
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        results = await asyncio.gather(
            *(app.host.run(channel.request(f"message {n}")) for n in range(3))
        )
    assert [r.outcome for r in results] == ["ok", "ok", "ok"]
    # Each request saw every earlier turn of the conversation: the lane ran them one by one.
    for n, body in enumerate(fake.requests):
        texts = " ".join(_user_texts(body))
        assert all(f"message {m}" in texts for m in range(n + 1))


async def test_different_conversations_run_concurrently(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.hold()
    one, _ = console("one")
    two, _ = console("two")
    async with App(make_config(), [ready(one), ready(two)], HOST_ONLY) as app:
        first = asyncio.create_task(app.host.run(one.request("hi from one")))
        second = asyncio.create_task(app.host.run(two.request("hi from two")))
        # Both turns reach the model before either is answered: each lane runs its own.
        await until(lambda: fake.in_flight == 2, state=lambda: fake.in_flight)
        assert app.host.queue_depth == 2
        fake.release()
        await asyncio.gather(first, second)


async def test_a_full_lane_answers_busy_without_a_model_call(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.hold()
    config = make_config("[host]\nqueue_per_conversation = 1\n")
    channel, out = console()
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        await app.host.resume()
        running = asyncio.create_task(app.host.run(channel.request("first")))
        # The first turn is at the model: running, and the queue is empty.
        await until(lambda: len(fake.requests) == 1, state=lambda: len(fake.requests))
        queued = asyncio.create_task(app.host.run(channel.request("second")))
        await until(lambda: app.host.queue_depth == 2, state=lambda: app.host.queue_depth)
        refused = await app.host.submit(channel.request("third"), source="test", marks=["3"])
        fake.release()
        await asyncio.gather(running, queued)
        await app.host.idle()
        [item] = await app.store.db.fetch_all("SELECT state FROM inbox")
    assert refused is Admission.BUSY
    assert item["state"] == "refused"  # stored (and acknowledged), then refused
    assert "still working" in out.getvalue()
    assert len(fake.requests) == 2


async def test_a_person_over_the_rate_gets_a_polite_answer(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    config = make_config("[host]\nturns_per_person_per_minute = 2\n")
    channel, out = console()
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        outcomes = []
        for n in range(3):
            request = replace(channel.request(f"m{n}"), person="slack:T1:U1")
            outcomes.append((await app.host.run(request)).outcome)
    assert outcomes == ["ok", "ok", "rate_limited"]
    assert "faster than I can answer" in out.getvalue()
    assert len(fake.requests) == 2


async def test_a_failed_turn_publishes_a_continuity_account(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.fail(400, body="bad request for testing")
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        failed = await app.host.run(channel.request("please do the thing"))
        ok = await app.host.run(channel.request("did it work?"))
        history = await app.store.history.load(channel.conversation)
    assert failed.outcome == "failed"
    assert "couldn't" in out.getvalue().lower() or "could not" in out.getvalue().lower()
    assert ok.outcome == "ok"
    assert history[0].text == "please do the thing"
    assert history[1].role == "assistant"
    assert "did not complete" in history[1].text
    # The next turn's request carries the account, so the model knows what happened.
    assert any("did not complete" in text for text in _assistant_texts(fake.requests[-1]))


def _assistant_texts(body: dict[str, object]) -> list[str]:
    return [
        block["text"]
        for message in body["messages"]  # type: ignore[attr-defined]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "text"
    ]


async def test_shutdown_cancels_a_turn_past_the_grace_and_keeps_its_account(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.stall(5.0, times=1)
    config = make_config("[host]\nshutdown_grace = 0.1\n")
    channel, _ = console()
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        running = asyncio.create_task(app.host.run(channel.request("a long job")))
        await until(lambda: len(fake.requests) == 1)  # the turn is at the model
        await app.host.close()
        result = await running
        history = await app.store.history.load(channel.conversation)
    assert result.outcome == "cancelled"
    assert [entry.role for entry in history] == ["user", "assistant"]
    assert "did not complete" in history[1].text
    assert await _closed_refuses(config)


async def _closed_refuses(config: Config) -> bool:
    channel, _ = console()
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        await app.host.close()
        late = await app.host.submit(channel.request("late"), source="test", marks=["late"])
        return late is Admission.CLOSED


async def test_unknown_skill_gets_a_clear_reply_and_no_model_call(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        result = await app.host.run(channel.request("/no-such-skill do it"))
    assert result.outcome == "refused"
    assert "no-such-skill" in out.getvalue()
    assert "summarize" in out.getvalue()
    assert fake.requests == []


async def test_a_skill_command_rides_the_user_message_not_the_system_prompt(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        await app.host.run(channel.request("/summarize the thread above"))
        history = await app.store.history.load(channel.conversation)
    body = fake.requests[0]
    system = " ".join(block["text"] for block in body["system"])
    assert "List decisions, then open questions" not in system
    current = " ".join(block["text"] for block in body["messages"][-1]["content"])
    assert "List decisions, then open questions" in current
    assert history[0].text == "the thread above"


async def test_overflow_compacts_and_the_next_request_starts_with_the_summary(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        for n in range(4):
            await app.host.run(channel.request(f"note {n}: the deploy key is kept in vault"))
        fake.fail(400, body=OVERFLOW)
        fake.script("Summary: four notes about the deploy key in vault.", "answer after compaction")
        result = await app.host.run(channel.request("what do you know?"))
        history = await app.store.history.load(channel.conversation)
    assert result.outcome == "ok"
    assert history[0].summary
    assert history[-1].text == "answer after compaction"
    assert len(history) < 10


async def _after_three_facts(
    make_config: MakeConfig, text: str
) -> tuple[TurnResult, list[HistoryEntry], str]:
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        for n in range(3):
            await app.host.run(channel.request(f"fact {n}"))
        result = await app.host.run(channel.request(text))
        history = await app.store.history.load(channel.conversation)
    return result, history, out.getvalue()


async def test_compact_command_replaces_history_with_a_summary(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.script("noted 0", "noted 1", "noted 2", "Summary of facts 0 to 2.")
    result, history, _ = await _after_three_facts(make_config, "/compact")
    assert result.outcome == "ok"
    assert history[0].summary
    assert isinstance(history[0].blocks[0], TextBlock)


async def test_compact_with_instructions_hands_them_to_the_summary(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.script("noted 0", "noted 1", "noted 2", "Summary: tickets T-1 and T-2 are open.")
    result, history, _ = await _after_three_facts(make_config, "/compact focus on the open tickets")
    assert result.outcome == "ok"
    assert history[0].summary
    summary_request = fake.requests[-1]["messages"][0]["content"][0]["text"]
    assert "<focus>\nfocus on the open tickets\n</focus>" in summary_request


async def test_compact_is_a_command_only_as_a_whole_word(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    result, history, out = await _after_three_facts(make_config, "/compactify the report")
    assert not any(entry.summary for entry in history)
    assert len(fake.requests) == 3  # no summary request was made
    assert result.outcome == "refused"  # a /word that names no skill, said so
    assert "compactify" in out


async def test_start_greets_from_the_identity_and_help_lists_the_commands(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        start = await app.host.run(channel.request("/start"))
        greeting = out.getvalue()
        helped = await app.host.run(channel.request("/help"))
        listing = out.getvalue()[len(greeting) :]
    assert (start.outcome, helped.outcome) == ("command", "command")
    assert "Testbot" in greeting
    assert "/help" in greeting
    assert "no skill" not in greeting
    for command in ("/help", "/compact", "/summarize"):
        assert command in listing
    assert fake.requests == []


async def test_memory_captured_in_one_conversation_is_recalled_in_the_same_scope(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    config = make_config("[memory]\nwide_console_recall = true\n")
    first, _ = console("first")
    second, _ = console("second")
    async with App(config, [ready(first), ready(second)], HOST_ONLY) as app:
        await app.host.run(first.request("remember: the staging database is called heron"))
        await app.host.idle()
        await app.host.run(second.request("which staging database?"))
    last = fake.requests[-1]["messages"][-1]
    last_user = " ".join(block["text"] for block in last["content"])
    assert "heron" in last_user
    assert "which staging database?" in last_user


async def test_tool_rounds_are_published_and_replayed(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    from tests.fakes.anthropic import ToolCall

    fake.script(
        Reply(tool_calls=[ToolCall(name="memory_recall", input={"query": "heron"})]),
        "done",
    )
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        await app.host.run(channel.request("look it up"))
        await app.host.run(channel.request("again"))
        history = await app.store.history.load(channel.conversation)
    kinds = [[type(b).__name__ for b in entry.blocks] for entry in history]
    assert kinds[:4] == [["TextBlock"], ["ToolUseBlock"], ["ToolResultBlock"], ["TextBlock"]]
    replayed = fake.requests[-1]["messages"]
    assert replayed[1]["content"][0]["type"] == "tool_use"
    assert replayed[2]["content"][0]["type"] == "tool_result"


async def test_a_failed_request_driven_turn_posts_no_apology(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    from bot.turns import ConversationKind

    fake.fail(400, body="bad request for testing")
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        request = replace(
            channel.request("scheduled summary"), kind=ConversationKind.REQUEST, notifies=True
        )
        result = await app.host.run(request)
    assert result.outcome == "failed"
    assert result.delivery is None
    assert out.getvalue() == ""


async def test_a_message_the_window_cannot_hold_is_refused_before_any_call(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    config = make_config("context_window = 2000\nmax_tokens = 200\n")
    channel, out = console()
    async with App(config, [ready(channel)], HOST_ONLY) as app:
        result = await app.host.run(channel.request("word " * 3000))
        record = await app.store.records.show(result.turn_id)
    assert result.outcome == "refused"
    assert result.error == "estimated_input_exceeds_model_limit"
    assert "too large" in out.getvalue()
    assert fake.requests == []
    assert record is not None
    assert record["outcome"] == "refused"
    assert record["details"]["floor_unmet"] is True


async def test_the_turn_record_keeps_the_request_usage_and_budget(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        result = await app.host.run(channel.request("hello"))
        record = await app.store.records.show(result.turn_id)
    assert record is not None
    assert record["outcome"] == "ok"
    assert record["request"]["messages"][-1]["role"] == "user"
    assert record["usage"]["input_tokens"] > 0
    assert record["details"]["floor_unmet"] is False


async def test_a_stopped_turn_ends_alone_and_the_queued_turn_runs_after_its_account(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    fake.hang_midstream("Counting: one, two")
    fake.script("three")
    channel, out = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        await app.host.resume()
        assert not await app.host.cancel(channel.conversation)  # nothing runs yet
        running = asyncio.create_task(app.host.run(channel.request("count to ten")))
        await until(lambda: "Counting" in out.getvalue())
        queued = asyncio.create_task(app.host.run(channel.request("go on")))
        assert await app.host.cancel(channel.conversation)
        assert await app.host.cancel(channel.conversation)  # a second press changes nothing
        stopped, after = await asyncio.gather(running, queued)
        history = await app.store.history.load(channel.conversation)
        await until(lambda: fake.abandoned)  # the stopped call's connection was closed
    assert (stopped.outcome, stopped.error) == ("cancelled", "stopped")
    assert after.outcome == "ok"  # the lane went on: only the stopped turn ended
    assert [entry.role for entry in history] == ["user", "assistant"] * 2
    assert "the person stopped it" in history[1].text
    assert "Counting: one, two" in history[1].text
    assert "did not complete" in str(fake.requests[-1]["messages"])  # the next turn knows


async def test_commands_beside_the_conversation_are_answered_without_a_model_call(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    channel, _ = console()
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        unknown = await app.host.command(channel.request("/what"))
        nobody = await app.host.command(channel.request("/usage"))  # a console has no person
        listing = await app.host.command(channel.request("/memory"))
    assert unknown.startswith("I don't know that command")
    assert nobody.startswith("Today this conversation has used 0 tokens")
    assert listing.startswith("I can't tell who you are here")
    assert fake.requests == []


async def test_in_bot_chat_usage_and_memory_answer_the_person_at_the_terminal(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    """The console is a private conversation (SPEC §1): /usage answers there (never "only in a
    private chat"), with what this conversation used today, and /memory says why it has no
    entries of the person's own and where an operator looks instead. No model call for either."""
    fake.script("Noted.")
    channel, out = console(text="my locker code is 4411\n/usage\n/memory\n/forget all\n")
    async with App(make_config(), [ready(channel)], HOST_ONLY) as app:
        await channel.finished()
        await app.host.idle()
    said, usage, memory, forget = out.getvalue().splitlines()
    assert said == "Noted."
    assert usage.startswith("Today this conversation has used ")
    assert " 0 tokens" not in usage
    assert "private" not in usage
    assert "`bot memory search QUERY`" in memory
    assert forget == memory
    assert len(fake.requests) == 1
