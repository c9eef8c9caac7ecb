"""`bot doctor`'s Slack check against the fake Slack: the token, then the granted scopes."""

from __future__ import annotations

import pytest

from bot.config import Secrets
from bot.errors import CheckFailed
from channels.slack.doctor import check_slack
from channels.slack.settings import SlackSettings
from tests.fakes.slack import FakeSlack


def _settings(slack: FakeSlack) -> SlackSettings:
    return SlackSettings(enabled=True, api_url=slack.api_url)


async def test_a_fully_scoped_token_passes(slack: FakeSlack) -> None:
    report = await check_slack(_settings(slack), Secrets({"SLACK_BOT_TOKEN": slack.bot_token}))
    assert "every scope the host uses is granted" in report


async def test_missing_context_scopes_pass_with_a_note(slack: FakeSlack) -> None:
    slack.revoke("channels:read")
    report = await check_slack(_settings(slack), Secrets({"SLACK_BOT_TOKEN": slack.bot_token}))
    assert "without channels:read" in report


async def test_a_missing_required_scope_fails_with_the_fix(slack: FakeSlack) -> None:
    slack.revoke("chat:write")
    with pytest.raises(CheckFailed, match=r"lacks the scopes chat:write.*reinstall"):
        await check_slack(_settings(slack), Secrets({"SLACK_BOT_TOKEN": slack.bot_token}))


async def test_a_refused_token_is_named_and_never_echoed(slack: FakeSlack) -> None:
    wrong = "xoxb-0000-wrong-token-value"
    with pytest.raises(CheckFailed) as raised:
        await check_slack(_settings(slack), Secrets({"SLACK_BOT_TOKEN": wrong}))
    assert "SLACK_BOT_TOKEN" in str(raised.value)
    assert wrong not in str(raised.value)


async def test_a_missing_assistant_scope_passes_with_the_fix(slack: FakeSlack) -> None:
    slack.revoke("assistant:write")
    report = await check_slack(_settings(slack), Secrets({"SLACK_BOT_TOKEN": slack.bot_token}))
    assert "without assistant:write the assistant pane" in report
    assert "Agents & AI Apps" in report


async def test_with_agent_messaging_a_missing_assistant_scope_names_the_stop_button(
    slack: FakeSlack,
) -> None:
    slack.revoke("assistant:write")
    slack.revoke("commands")
    settings = SlackSettings(enabled=True, api_url=slack.api_url, messaging="agent")
    report = await check_slack(settings, Secrets({"SLACK_BOT_TOKEN": slack.bot_token}))
    assert "without assistant:write agent messaging has no sessions and no stop button" in report
    assert "without commands the slash commands" in report


def test_doctor_describes_each_way_of_messaging_and_the_command_names() -> None:
    from channels.slack.doctor import messaging

    agent = messaging(SlackSettings(messaging="agent", commands={"memory": "/bot-memory"}))
    assert "stop button" in agent
    assert "agent_session_stopped" in agent
    assert "/bot-memory, /forget, /usage and /schedules" in agent
    assert "deploy/slack-app-manifest.yaml" in agent
    pane = messaging(SlackSettings())
    assert pane.startswith("assistant:")
    assert "slack-app-manifest.assistant.yaml" in pane
