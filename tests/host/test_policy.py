"""The surface policy through the whole host (console channel, fake model): an operator's
templates shape the session block and the turn context, a console rule adds its instructions,
and an overall budget stops model calls with one notice while an operator stays exempt."""

from __future__ import annotations

from pathlib import Path

from bot.cli.compose import App, ready
from tests.fakes.anthropic import FakeAnthropic
from tests.host.conftest import HOST_ONLY, console
from tests.host.test_host import MakeConfig

SESSION = """\
## About this chat ({conversation_kind})
{conversation}
{surface}
{message_budget}
{console_id}
{delivery}
{secrecy}
{memory}
{instructions}
"""
TURN = "[now: {weekday}, {timestamp}]\n{attachments}\n{viewing}\n"


async def test_operator_templates_and_a_console_rule_shape_the_request(
    make_config: MakeConfig, fake: FakeAnthropic, agent_dir: Path
) -> None:
    (agent_dir / "session.txt").write_text(SESSION, encoding="utf-8")
    (agent_dir / "turn.txt").write_text(TURN, encoding="utf-8")
    config = make_config(
        "[prompt]\nsession_template = 'session.txt'\nturn_template = 'turn.txt'\n"
        "[[surfaces]]\nplatform = 'console'\ninstructions = 'You are being tested.'\n"
    )
    channel, _ = console("demo", "hello\n")
    async with App(config, [ready(channel)], HOST_ONLY):
        await channel.finished()
    [body] = fake.requests
    session = body["system"][-1]["text"]
    assert session.startswith("## About this chat (console)\nThis is a console conversation")
    assert session.endswith("# Instructions for this place\n\nYou are being tested.")
    current = body["messages"][-1]["content"][-1]["text"]
    assert current.startswith("[now: ")
    assert "<turn_context>" not in current


async def test_an_overall_budget_stops_model_calls_with_one_notice(
    make_config: MakeConfig, fake: FakeAnthropic
) -> None:
    config = make_config("[budget]\ndaily_tokens = 1\n")
    fake.script("the only answer")
    channel, out = console("demo", "one\ntwo\nthree\n")
    async with App(config, [ready(channel)], HOST_ONLY):
        await channel.finished()
    lines = out.getvalue().splitlines()
    assert len(fake.requests) == 1
    assert lines[0] == "the only answer"
    assert len(lines) == 2  # one notice for "two", nothing for "three"
    assert "usage budget for today" in lines[1]
    assert "resets at" in lines[1]
