"""For `bot doctor`: is the Slack bot token accepted, and does it carry the scopes the host uses?

Slack names a token's granted scopes in the `x-oauth-scopes` header of every Web API answer, so
one `auth.test` call tells both.
"""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Secrets
from bot.errors import ChannelUnavailable, CheckFailed, ConfigError
from channels.slack.api import auth_test
from channels.slack.settings import SlackSettings

# Without these the channel cannot work: hear mentions and DMs, answer, show progress, name people.
REQUIRED_SCOPES = frozenset(
    {"app_mentions:read", "im:history", "chat:write", "reactions:write", "users:read"}
)
# Without these it still works, with less context: surfaces named by kind and id, and no
# preceding messages in channels, private channels or group DMs.
CONTEXT_SCOPES = frozenset(
    {
        "channels:read",
        "groups:read",
        "im:read",
        "mpim:read",
        "channels:history",
        "groups:history",
        "mpim:history",
    }
)


# Without this, files people share are not read (each gets a one-line "refused" answer).
FILE_SCOPES = frozenset({"files:read"})
# Without this, the assistant pane offers no suggested prompts and names no thread, and agent
# messaging has no sessions (no stop button): the app is not declared an agent.
ASSISTANT_SCOPES = frozenset({"assistant:write"})
# Without this, the slash commands (/memory, /forget, /usage, /schedules) are not the app's.
COMMAND_SCOPES = frozenset({"commands"})
# Without this, an approval card cannot reach an approver's DM (`[approvals] where = "approver"`):
# it is posted in the conversation without its arguments instead.
APPROVER_SCOPES = frozenset({"im:write"})
# The manifest for each way of messaging (deploy/): the events it subscribes differ.
MANIFESTS = {
    "agent": "deploy/slack-app-manifest.yaml",
    "assistant": "deploy/slack-app-manifest.assistant.yaml",
}


def messaging(settings: SlackSettings) -> str:
    """What `bot doctor` says of `[slack] messaging` and the slash commands."""
    commands = settings.commands
    names = f"{commands.memory}, {commands.forget}, {commands.usage} and {commands.schedules}"
    manifest = MANIFESTS[settings.messaging]
    if settings.messaging == "agent":
        what = (
            "agent: the Messages tab, a session per thread (processing / active) and Slack's "
            "stop button; the app needs agent_view, the assistant:write scope and the "
            "app_home_opened and agent_session_stopped events"
        )
    else:
        what = (
            "assistant: the assistant pane (assistant_view, assistant_thread_started); Slack "
            'will retire it: for the stop button set messaging = "agent" and update the app'
        )
    return f"{what} ({manifest}); slash commands {names} (the app must list the same)"


async def check_slack(settings: SlackSettings, secrets: Secrets) -> str:
    token = secrets.get("SLACK_BOT_TOKEN")
    if not token:
        raise CheckFailed("SLACK_BOT_TOKEN is not set. Fix: export it or add it to .env.")
    client = AsyncWebClient(token=token, base_url=settings.api_url)
    try:  # the same check, and the same line, as `bot run` at start-up
        answer = await auth_test(client, settings.api_url)
    except (ConfigError, ChannelUnavailable) as exc:
        raise CheckFailed(str(exc)) from None
    granted = {s.strip() for s in answer.headers.get("x-oauth-scopes", "").split(",") if s}
    missing = sorted(REQUIRED_SCOPES - granted)
    if missing:
        raise CheckFailed(
            f"the bot token lacks the scopes {', '.join(missing)}. Fix: add them under OAuth & "
            "Permissions (or recreate the app from deploy/slack-app-manifest.yaml) and reinstall "
            "the app to the workspace."
        )
    who = f"bot {answer.get('user', '?')} in {answer.get('team', '?')}"
    notes = []
    lacking = sorted(CONTEXT_SCOPES - granted)
    if lacking:
        notes.append(
            f"without {', '.join(lacking)} some surfaces are named by kind and id and get no "
            "preceding messages (add the scopes and reinstall for full context)"
        )
    if FILE_SCOPES - granted:
        notes.append("without files:read shared files are not read (add it and reinstall)")
    if ASSISTANT_SCOPES - granted:
        pane = (
            "agent messaging has no sessions and no stop button"
            if settings.messaging == "agent"
            else "the assistant pane offers no suggested prompts and names no thread"
        )
        notes.append(
            f"without assistant:write {pane} (turn on 'Agents & AI Apps' in the app settings, "
            f"add the scope and reinstall; {MANIFESTS[settings.messaging]} has it)"
        )
    if COMMAND_SCOPES - granted:
        notes.append(
            "without commands the slash commands /memory, /forget, /usage and /schedules do not "
            "reach the bot (add the scope and the commands, as the manifest does, and reinstall)"
        )
    if APPROVER_SCOPES - granted:
        notes.append(
            "without im:write approval cards cannot be sent to approvers privately (add it and "
            "reinstall)"
        )
    return "; ".join([who, *notes]) if notes else f"{who}; every scope the host uses is granted"
