"""Slack's settings: the `[slack]` section and the secrets the Slack channel reads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.config import Section

DAY = 86_400

# Environment variables the Slack channel reads credentials from (never the file).
SECRETS = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET")


# Slack shows at most four suggested prompts in an assistant thread.
MAX_ASSISTANT_PROMPTS = 4


class AssistantPrompt(BaseModel):
    """One suggested prompt of the assistant pane: the button's title and the message it sends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\r\n]*\S[^\r\n]*$")]
    message: Annotated[str, Field(min_length=1, max_length=2000, pattern=r"\S")]


# The host commands people can send as Slack slash commands, by the host's own name.
HOST_COMMANDS = ("memory", "forget", "usage", "schedules")
_COMMAND_NAME = r"^/[a-z0-9_-]{1,31}$"  # what Slack accepts as a slash command's name


class SlashCommands(BaseModel):
    """The slash command each host command is registered as in the Slack app (another name where
    a workspace already has /memory, /forget, /usage or /schedules)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: Annotated[str, Field(pattern=_COMMAND_NAME)] = "/memory"
    forget: Annotated[str, Field(pattern=_COMMAND_NAME)] = "/forget"
    usage: Annotated[str, Field(pattern=_COMMAND_NAME)] = "/usage"
    schedules: Annotated[str, Field(pattern=_COMMAND_NAME)] = "/schedules"

    def slashes(self) -> list[str]:
        """Every slash command the app answers, one per host command."""
        return [getattr(self, name) for name in HOST_COMMANDS]

    @model_validator(mode="after")
    def _distinct(self) -> SlashCommands:
        names = self.slashes()
        if len(set(names)) != len(names):
            raise ValueError(
                f"two host commands share one slash command ({', '.join(names)}). Fix: give "
                "memory, forget, usage and schedules different names."
            )
        return self

    def host_command(self, slash: str) -> str | None:
        """The host command (`memory`, `forget`, `usage`, `schedules`) a slash command stands
        for."""
        return next((name for name in HOST_COMMANDS if getattr(self, name) == slash), None)


class SlackSettings(Section):
    enabled: bool = False
    mode: Literal["socket", "http"] = "socket"
    api_url: str = "https://slack.com/api/"
    allowed_channel_ids: list[str] = Field(default_factory=list)
    allowed_user_ids: list[str] = Field(default_factory=list)
    resolve_channel_names: bool = True
    ignore_other_bots: bool = True
    user_cache_seconds: Annotated[int, Field(ge=0, le=7 * DAY)] = 3600
    # The emoji (without colons) put on the triggering message while its turn runs.
    progress_reaction: Annotated[str, Field(pattern=r"^[a-z0-9_+'-]{1,100}$")] = (
        "hourglass_flowing_sand"
    )
    # How answers show while they are written: Slack's streaming methods in threads ("native";
    # a DM's top level is shown with edits), a posted message updated about once a second
    # ("edits"), or only whole ("off").
    stream: Literal["native", "edits", "off"] = "native"
    # Seconds between two updates of one streamed message (Slack's rate tiers allow about one).
    stream_interval: Annotated[float, Field(ge=0.0, le=60.0)] = 1.0
    # Shared files are downloaded only from URLs under this origin (Slack's `url_private`).
    files_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+/$")] = "https://files.slack.com/"
    # The assistant pane (Agents & AI apps): the prompts offered when someone opens a new
    # assistant thread (none: no prompts), their heading, and the thread status while a turn runs.
    assistant_prompts: Annotated[list[AssistantPrompt], Field(max_length=MAX_ASSISTANT_PROMPTS)] = (
        Field(default_factory=list)
    )
    assistant_prompts_title: Annotated[str, Field(max_length=150, pattern=r"^[^\r\n]*$")] = (
        "How can I help?"
    )
    assistant_status: Annotated[str, Field(max_length=100, pattern=r"^[^\r\n]*\S[^\r\n]*$")] = (
        "is thinking…"
    )
    # How people talk to the app in Slack: "agent" (agent messaging, the app's Messages tab:
    # a session per thread with Slack's stop button) or "assistant" (the assistant pane). A
    # config without the key keeps the assistant pane, which apps made from the earlier manifest
    # have; `bot init` writes "agent" for new apps (docs/slack.md: choosing).
    messaging: Literal["agent", "assistant"] = "assistant"
    # The slash commands the host answers privately (the app's manifest must list the same).
    commands: SlashCommands = Field(default_factory=SlashCommands)
    # Slash commands are answered through their response_url only under this origin (Slack's).
    hooks_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+/$")] = "https://hooks.slack.com/"
