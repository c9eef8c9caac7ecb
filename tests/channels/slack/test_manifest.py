"""The Slack app manifest asks for exactly the scopes and events the host uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.slack.settings import SlashCommands
from tests.fakes.slack import ALL_SCOPES

DEPLOY = Path(__file__).parents[3] / "deploy"
MANIFEST = DEPLOY / "slack-app-manifest.yaml"  # agent messaging: for new apps
ASSISTANT = DEPLOY / "slack-app-manifest.assistant.yaml"  # the assistant pane: existing apps
BOTH = pytest.mark.parametrize("manifest", [MANIFEST, ASSISTANT], ids=["agent", "assistant"])


def listed_under(key: str, manifest: Path = MANIFEST) -> list[str]:
    """The `- item` lines of one YAML list (the manifest keeps to this simple shape)."""
    lines = manifest.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    items = []
    for line in lines[start + 1 :]:
        if not line.strip().startswith("- "):
            break
        items.append(line.strip()[2:])
    return items


@BOTH
def test_scopes_are_exactly_those_the_fake_slack_enforces(manifest: Path) -> None:
    # The fake answers missing_scope for any method called without its scope, and every
    # Slack test runs with exactly these scopes granted.
    assert sorted(listed_under("bot", manifest)) == sorted(ALL_SCOPES)


def test_agent_messaging_events_are_mentions_dms_members_leaving_the_tab_and_the_stop() -> None:
    assert listed_under("bot_events") == [
        "agent_session_stopped",
        "app_home_opened",
        "app_mention",
        "member_left_channel",
        "message.im",
    ]
    text = MANIFEST.read_text(encoding="utf-8")
    assert "\n  agent_view:\n    agent_description: " in text
    assert "assistant_view" not in text


def test_assistant_pane_events_are_mentions_dms_members_leaving_and_the_pane() -> None:
    assert listed_under("bot_events", ASSISTANT) == [
        "app_mention",
        "assistant_thread_context_changed",
        "assistant_thread_started",
        "member_left_channel",
        "message.im",
    ]
    assert "\n  assistant_view:\n    assistant_description: " in ASSISTANT.read_text("utf-8")


@BOTH
def test_the_slash_commands_are_the_default_command_names(manifest: Path) -> None:
    lines = manifest.read_text(encoding="utf-8").splitlines()
    listed = [line.split(": ", 1)[1] for line in lines if line.startswith("    - command: ")]
    names = SlashCommands()
    assert listed == [names.memory, names.forget, names.usage, names.schedules]


@BOTH
def test_socket_mode_is_the_default(manifest: Path) -> None:
    assert "socket_mode_enabled: true" in manifest.read_text(encoding="utf-8")


@BOTH
def test_doctor_checks_exactly_the_manifest_scopes(manifest: Path) -> None:
    from channels.slack.doctor import (
        APPROVER_SCOPES,
        ASSISTANT_SCOPES,
        COMMAND_SCOPES,
        CONTEXT_SCOPES,
        FILE_SCOPES,
        REQUIRED_SCOPES,
    )

    every = REQUIRED_SCOPES | CONTEXT_SCOPES | FILE_SCOPES | ASSISTANT_SCOPES | COMMAND_SCOPES
    every |= APPROVER_SCOPES
    assert sorted(every) == sorted(listed_under("bot", manifest))


def test_doctor_names_the_manifest_of_each_way_of_messaging() -> None:
    from channels.slack.doctor import MANIFESTS

    root = DEPLOY.parent
    assert {mode: (root / path).exists() for mode, path in MANIFESTS.items()} == {
        "agent": True,
        "assistant": True,
    }
