"""Each configured agent's own parts (SPEC §15): its texts read from its files, its toolbox and
its assembler (its own agent-wide cached prefix, checked against its model's window), built
once at start-up and by the commands that show them (`bot preview`, `bot tools`, `bot doctor`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.agentfiles import load_agent
from bot.agents import Agent, Roster
from bot.errors import ConfigError
from bot.policy.files import Policy, load_policy
from bot.ports.attachments import AttachmentStore
from bot.ports.tools import Tool, ToolSpec
from bot.prompt import AgentTexts, Assembler, ModelLimits, Templates, TokenCounter
from bot.prompt.assembler import FLOOR_SHARE
from bot.tools.toolbox import MakeTool, Toolbox

if TYPE_CHECKING:
    from bot.cli.settings import Config
    from bot.mcp.hub import McpHub
    from bot.memory.recall import RecallCache
    from bot.turns import TurnRequest
    from channels.cron.chat import ScheduleDesk


@dataclass(frozen=True)
class AgentParts:
    """One agent's texts, toolbox and assembler."""

    agent: Agent
    texts: AgentTexts
    toolbox: Toolbox
    assembler: Assembler


def agent_texts(config: Config, agent: Agent) -> AgentTexts:
    """The agent's files, read; a problem names the agent when there are several."""
    try:
        return load_agent(agent.settings or config.settings.agent)
    except ConfigError as exc:
        if not config.settings.agents:
            raise
        raise ConfigError(f"agents ({agent.name}): {exc}") from None


def build_agents(
    config: Config,
    roster: Roster,
    counter: TokenCounter,
    policy: Policy,
    toolbox_for: Callable[[AgentTexts], Toolbox],
) -> Mapping[str, AgentParts]:
    """Every agent's parts, by name, the default agent's first."""
    built: dict[str, AgentParts] = {}
    for agent in roster.all:
        texts = agent_texts(config, agent)
        toolbox = toolbox_for(texts)
        assembler = build_assembler(config, texts, counter, policy, toolbox, agent=agent)
        built[agent.name] = AgentParts(agent, texts, toolbox, assembler)
    return built


def build_toolbox(
    config: Config,
    agent: AgentTexts,
    files: AttachmentStore | None = None,
    hub: McpHub | None = None,
    desk: ScheduleDesk | None = None,
    listing: bool = False,
) -> Toolbox:
    """The tools the configuration offers; `files` where shared files are kept (the host's),
    `hub` the started MCP servers (their tools), `desk` the schedules set up in chat. `listing`:
    only to say what is offered (`bot tools`), so the `schedule` tool is listed without a desk."""
    settings = config.settings
    own: list[tuple[ToolSpec, MakeTool]] = []
    if desk is not None:
        from channels.cron.chat import SCHEDULE_SPEC

        own.append((SCHEDULE_SPEC, lambda request, recall: desk.tool(request)))
    elif listing and settings.schedules.enabled:
        from channels.cron.chat import SCHEDULE_SPEC

        own.append((SCHEDULE_SPEC, _listed_only))
    return Toolbox(
        agent,
        skill_max_bytes=settings.agent.skill_max_bytes,
        memory=settings.memory.enabled,
        attachments=settings.attachments.enabled,
        files=files if settings.attachments.enabled else None,
        extra=hub.tools if hub is not None else tuple,
        own=own,
    )


def _listed_only(request: TurnRequest, recall: RecallCache) -> Tool:
    raise RuntimeError("a toolbox built for listing runs no tools")


def build_assembler(
    config: Config,
    texts: AgentTexts,
    counter: TokenCounter,
    policy: Policy | None = None,
    toolbox: Toolbox | None = None,
    *,
    agent: Agent | None = None,
) -> Assembler:
    """The assembler of `texts` (the agent `agent`'s: its model in place of `[model]`'s), or a
    ConfigError when the model's window cannot fund the prompt's floors (the same check for
    `bot run`, `bot chat`, `bot preview` and `bot doctor`)."""
    settings = config.settings
    policy = policy or load_policy(settings, texts)
    toolbox = toolbox or build_toolbox(config, texts)
    model = settings.model
    if agent is not None and agent.model is not None:
        model = model.model_copy(update={"name": agent.model})
    try:
        assembler = Assembler(
            texts,
            ModelLimits(model.name, model.max_tokens, model.window, model.thinking_budget),
            timezone=settings.agent.timezone,
            counter=counter,
            tools=toolbox.specs,
            memory_enabled=settings.memory.enabled,
            skill_max_bytes=settings.agent.skill_max_bytes,
            templates=Templates(policy.session_template, policy.turn_template),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if assembler.fixed_tokens > FLOOR_SHARE * assembler.input_budget:
        raise ConfigError(
            f"model.context_window ({model.window}) leaves {assembler.input_budget} "
            f"tokens for input after model.max_tokens ({settings.model.max_tokens}), but the "
            f"agent-wide part (guardrails, identity, skills, tool definitions) alone takes about "
            f"{assembler.fixed_tokens}, leaving no room for the conversation. Fix: raise "
            "model.context_window, lower model.max_tokens, or shorten the identity and "
            "agent.selected_skills."
        )
    return assembler
