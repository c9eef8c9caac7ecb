"""The host's global limits through the whole App, with Telegram (python-telegram-bot polling the
fake Bot API) as the way in: the cap on model calls running at once across conversations
(`host.max_concurrent_turns`), and refusal notices at most once per person per minute."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.cli.compose import App
from bot.cli.settings import Config, load_config
from bot.replies import TOO_FAST
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.waiting import until

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def configure(agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic, host: str) -> Config:
    write_config(
        agent_dir,
        f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
        f"\n[host]\n{host}\n",
    )
    environment = {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": claude.base_url,
        "TELEGRAM_BOT_TOKEN": tg.token,
    }
    return load_config(agent_dir / "bot.toml", env=environment)


def logged(logs: list[dict[str, Any]], event: str) -> int:
    return sum(1 for line in logs if line["event"] == event)


async def test_model_calls_across_conversations_never_exceed_the_cap(
    agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    config = configure(agent_dir, tg, claude, "max_concurrent_turns = 2")
    people = [tg.user(f"Person{n}", None, f"person{n}") for n in range(5)]
    claude.hold()
    with capture_logs() as logs:
        async with App(config) as app:
            for person in people:  # five conversations at once
                await tg.push(tg.message(tg.private_chat(person), person, "hello"))
            # Every turn has reached its model call; two of them are in it.
            await until(lambda: logged(logs, "turn_context") == 5 and len(claude.requests) >= 2)
            claude.release()
            await tg.wait_sent(5)
            await app.host.idle()
    assert claude.most_in_flight == 2
    assert len(claude.requests) == 5


async def test_refusal_notices_go_to_a_person_at_most_once_a_minute(
    agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    config = configure(agent_dir, tg, claude, "turns_per_person_per_minute = 1")
    alice = tg.user("Alice", "Chen", "alice")
    claude.script("the one answer")
    async with App(config) as app:
        for n in range(5):
            await tg.push(tg.message(tg.private_chat(alice), alice, f"message {n}"))
        await until(lambda: not tg.pending_updates)  # all five stored and confirmed
        await app.host.idle()
        await tg.wait_sent(2)
    texts = [sent.plain for sent in tg.sent]
    assert sorted(texts) == sorted(["the one answer", TOO_FAST])
    assert len(claude.requests) == 1


async def test_a_turn_that_would_pass_the_per_turn_token_ceiling_is_stopped_and_told(
    agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    # SPEC §17: the spend limits of scheduled runs hold for turns people start too.
    from bot.replies import turn_stopped
    from tests.fakes.anthropic import Reply, ToolCall

    config = configure(
        agent_dir, tg, claude, "max_concurrent_turns = 4\n\n[budget]\nmax_tokens_per_turn = 1000"
    )
    alice = tg.user("Alice", "Chen", "alice")
    claude.script(
        *[Reply(tool_calls=[ToolCall("memory_recall", {"query": f"q{n}"})]) for n in range(9)]
    )
    async with App(config) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "dig through everything"))
        await tg.wait_sent(1)
        await app.host.idle()
        [summary] = await app.store.records.recent(limit=1)
    assert [sent.plain for sent in tg.sent] == [turn_stopped("tokens", 1000)]
    assert len(claude.requests) <= 1  # the first call fits, the second would not
    assert summary.outcome == "stopped"
