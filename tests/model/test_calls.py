"""Streaming calls, retries and failures of the model runtime, against the fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from bot.config import ModelSettings
from bot.errors import ModelAuthError, ModelError, TurnFailed
from bot.model import AnthropicRuntime
from bot.model.wire import encode
from bot.ports.model import AssembledRequest
from bot.ports.records import Usage
from bot.prompt.tokens import TokenCounter
from bot.replies import ANSWER_RESTARTED
from bot.turns import HistoryEntry
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.model.conftest import MODEL, Builder, FakeTime, plan


async def test_streams_deltas_and_returns_the_answer(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.script("The deploy runs at nine, from the main branch.")
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    outcome = await runtime.run(plan("When is the deploy?", on_text=on_text))

    assert outcome.text == "The deploy runs at nine, from the main branch."
    assert len(deltas) > 1
    assert "".join(deltas) == outcome.text
    assert [(e.role, e.text) for e in outcome.entries] == [("assistant", outcome.text)]
    assert outcome.history is None
    assert outcome.attempts == 1
    sent = fake.requests[0]
    assert sent["stream"] is True
    assert outcome.request is not None
    assert outcome.request["messages"] == sent["messages"]
    usage = fake.usages[0]
    assert outcome.usage == Usage(
        usage["input_tokens"],
        usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"],
        usage["output_tokens"],
    )


async def test_sends_the_key_and_the_assembled_body_as_is(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    p = plan("hello")
    await runtime.run(p)
    expected = encode(p.builder.build(p.prompt, ()).request)
    sent = {k: v for k, v in fake.requests[0].items() if k != "stream"}
    assert sent == expected


async def test_overload_then_rate_limit_then_answer(
    runtime: AnthropicRuntime, fake: FakeAnthropic, fake_time: FakeTime
) -> None:
    fake.fail(529)
    fake.fail(429, retry_after=1)
    fake.script("third time lucky")

    outcome = await runtime.run(plan("hi"))

    assert outcome.text == "third time lucky"
    assert outcome.attempts == 3
    assert len(fake.requests) == 3
    assert len(fake_time.sleeps) == 2
    assert 0 < fake_time.sleeps[0] <= 0.5  # backoff with jitter on the first retry
    assert fake_time.sleeps[1] == 1.0  # the server's retry-after, honoured


@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors_and_dropped_connections_are_retried(
    runtime: AnthropicRuntime, fake: FakeAnthropic, status: int
) -> None:
    fake.fail(status)
    fake.disconnect()
    outcome = await runtime.run(plan("hi"))
    assert outcome.attempts == 3
    assert outcome.text.startswith("Answer to: hi")


async def test_a_stalled_call_times_out_and_is_retried(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(timeout=0.5)
    fake.stall(5.0)
    try:
        outcome = await runtime.run(plan("hi"))
    finally:
        await runtime.aclose()
    # The stalled call timed out and a retry answered. On a loaded machine a retry may time out
    # too (0.5 s is short), which is the same behaviour again: more attempts, same answer.
    assert outcome.attempts >= 2
    assert outcome.text == "Answer to: hi"
    assert len(fake.requests) == outcome.attempts


async def test_bad_request_is_not_retried(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    fake.fail(400)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    assert len(fake.requests) == 1
    assert caught.value.spend.attempts == 1
    assert "not retried" in str(caught.value)
    assert caught.value.reply
    assert "couldn't answer right now" in caught.value.reply


async def test_bad_key_is_not_retried_and_names_the_variable(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.fail(401)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    assert len(fake.requests) == 1
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert "sk-test-key" not in str(caught.value)


async def test_forbidden_is_not_retried(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    fake.fail(403)
    with pytest.raises(TurnFailed):
        await runtime.run(plan("hi"))
    assert len(fake.requests) == 1


async def test_gives_up_after_max_retries(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_retries=2)
    fake.fail(529, times=5)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    await runtime.aclose()
    assert len(fake.requests) == 3
    assert caught.value.spend.attempts == 3
    assert "max_retries = 2" in str(caught.value)
    assert caught.value.reply
    assert "couldn't answer right now" in caught.value.reply


async def test_gives_up_when_retry_after_exceeds_the_budget(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic, fake_time: FakeTime
) -> None:
    runtime = make_runtime(retry_budget=10)
    fake.fail(429, retry_after=30)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    await runtime.aclose()
    assert caught.value.spend.attempts == 1
    assert fake_time.sleeps == []


async def test_budget_counts_the_time_already_spent(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic, fake_time: FakeTime
) -> None:
    runtime = make_runtime(retry_budget=5, max_retries=10)
    fake.fail(429, times=10, retry_after=2)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    await runtime.aclose()
    assert fake_time.sleeps == [2, 2]  # a third wait would pass the 5-second budget
    assert caught.value.spend.attempts == 3


async def test_failure_carries_partial_text_and_usage(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.fail(400)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    assert caught.value.partial_text == ""
    assert caught.value.spend.request is not None
    assert caught.value.spend.request["messages"][-1]["content"][0]["text"] == "hi"


async def test_thinking_is_streamed_nowhere_and_never_stored(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.script(Reply(text="The answer.", thinking="Let me think about secrets."))
    outcome = await runtime.run(plan("q"))
    assert outcome.text == "The answer."
    assert all("secrets" not in e.text for e in outcome.entries)


async def test_usage_calibrates_the_token_counter(fake: FakeAnthropic, fake_time: FakeTime) -> None:
    counter = TokenCounter(calibration=1.0)
    runtime = AnthropicRuntime(
        ModelSettings(name=MODEL, base_url=fake.base_url),
        "sk-test-key",
        counter,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    base = plan("hi")

    def underestimate(history: Sequence[HistoryEntry]) -> AssembledRequest:
        request = base.builder.build(base.prompt, history)
        return replace(request, estimated_tokens=request.estimated_tokens // 2)

    await runtime.run(replace(base, builder=Builder(underestimate)))
    await runtime.aclose()
    assert counter.calibration > 1.0  # billed twice the estimate: the factor moves up


async def test_ping_names_the_key_on_401(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    fake.fail(401)
    with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY"):
        await runtime.ping()
    await runtime.ping()  # and works once the key is accepted
    assert fake.requests[-1]["max_tokens"] == 1


async def test_ping_reports_other_failures(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    fake.fail(500)
    with pytest.raises(ModelError, match=r"model\.name"):
        await runtime.ping()


async def test_an_error_event_mid_stream_is_retried(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.fail_midstream("overloaded_error")
    fake.script("the whole answer")
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    outcome = await runtime.run(plan("hi", on_text=on_text))
    assert outcome.text == "the whole answer"
    assert outcome.attempts == 2
    # What the reader saw streamed: the broken start, a note saying so, then the whole answer.
    assert "".join(deltas) == "Partial " + ANSWER_RESTARTED + "the whole answer"


async def test_a_failure_after_partial_streaming_keeps_the_partial_text(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_retries=0)
    fake.fail_midstream("overloaded_error")
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi"))
    await runtime.aclose()
    assert caught.value.partial_text == "Partial "


async def test_a_call_that_times_out_after_streaming_is_charged_an_estimate(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    """The API bills a call that streamed and then timed out: the turn's usage says so (an
    estimate of what was sent and streamed), and the host is told at once."""
    runtime = make_runtime(timeout=0.5, max_retries=0)
    fake.script("word " * 200)
    fake.words_per_delta = 1
    fake.hold_midway()  # the answer stops after its first word: the call times out
    shown: list[str] = []
    charged: list[Usage] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    try:
        with pytest.raises(TurnFailed) as caught:
            await runtime.run(plan("hi", on_text=on_text, on_charge=charged.append))
    finally:
        fake.release_midway()
        await runtime.aclose()
    assert shown  # it streamed before it timed out
    usage = caught.value.spend.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert charged == [usage]


async def test_a_cancelled_call_is_charged_before_the_cancellation_goes_on(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.script("word " * 50)
    fake.words_per_delta = 1
    fake.hold_midway()
    charged: list[Usage] = []
    started = asyncio.Event()

    async def on_text(delta: str) -> None:
        started.set()

    task = asyncio.create_task(runtime.run(plan("hi", on_text=on_text, on_charge=charged.append)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    fake.release_midway()
    [usage] = charged
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0


async def test_a_refused_call_is_not_charged(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.fail(400)
    charged: list[Usage] = []
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(plan("hi", on_charge=charged.append))
    assert caught.value.spend.usage == Usage()
    assert charged == []
