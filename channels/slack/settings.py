"""Slack's settings: the `[slack]` section and the secrets the Slack channel reads."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

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
