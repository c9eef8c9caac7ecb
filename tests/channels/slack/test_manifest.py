"""The Slack app manifest asks for exactly the scopes and events the host uses."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.slack import ALL_SCOPES

MANIFEST = Path(__file__).parents[3] / "deploy" / "slack-app-manifest.yaml"


def listed_under(key: str) -> list[str]:
    """The `- item` lines of one YAML list (the manifest keeps to this simple shape)."""
    lines = MANIFEST.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    items = []
    for line in lines[start + 1 :]:
        if not line.strip().startswith("- "):
            break
        items.append(line.strip()[2:])
    return items


def test_scopes_are_exactly_those_the_fake_slack_enforces() -> None:
    # The fake answers missing_scope for any method called without its scope, and every
    # Slack test runs with exactly these scopes granted.
    assert sorted(listed_under("bot")) == sorted(ALL_SCOPES)


def test_events_are_mentions_direct_messages_members_leaving_and_the_assistant_pane() -> None:
    assert listed_under("bot_events") == [
        "app_mention",
        "assistant_thread_context_changed",
        "assistant_thread_started",
        "member_left_channel",
        "message.im",
    ]


def test_the_assistant_pane_is_turned_on() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    assert "\n  assistant_view:\n    assistant_description: " in text


def test_socket_mode_is_the_default() -> None:
    assert "socket_mode_enabled: true" in MANIFEST.read_text(encoding="utf-8")


def test_doctor_checks_exactly_the_manifest_scopes() -> None:
    from channels.slack.doctor import (
        ASSISTANT_SCOPES,
        CONTEXT_SCOPES,
        FILE_SCOPES,
        REQUIRED_SCOPES,
    )

    every = REQUIRED_SCOPES | CONTEXT_SCOPES | FILE_SCOPES | ASSISTANT_SCOPES
    assert sorted(every) == sorted(listed_under("bot"))
