"""The operator console wired into `bot run` (SPEC §18): its inputs from what the root opened (the
store, the approval desk, the cron records, the MCP servers, the configuration), mounted on the
HTTP port when `[console]` enables it and names an operator."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import structlog
from aiohttp import web

from bot.cli.settings import Config
from bot.console.inputs import ConsoleInputs, JobView, ServerHealth, ToolOffer
from bot.logs import redact_text
from bot.ports.approvals import PressDesk
from bot.ports.stores import OpenStore, RunRecords

if TYPE_CHECKING:
    from bot.mcp.hub import McpHub
    from bot.policy.surfaces import Policies
    from bot.tools.toolbox import Toolbox
    from channels.cron.plan import JobPlan

log = structlog.get_logger(__name__)
MASKED = "(hidden)"
_SECRET_KEYS = ("password", "token", "secret", "hash", "key")


def install_console(
    web_app: web.Application,
    config: Config,
    store: OpenStore,
    *,
    desk: PressDesk | None,
    runs: Callable[[], Awaitable[RunRecords]],
    jobs: Callable[[], Sequence[JobPlan]],
    offered: tuple[Toolbox, Policies],
    hub: McpHub | None,
) -> bool:
    """Mount the console when it is to be served; whether it was. `offered`: the toolbox and
    the surface rules, for what each surface is offered (as `bot tools` lists it)."""
    settings = config.settings
    if not settings.console.enabled:
        return False
    if not settings.console.operators:
        log.warning("console_off", why="[console] enabled but no operators are configured")
        return False
    from bot.console.app import build_console, mount

    for operator in settings.console.operators:
        if operator.token_env is not None and not config.secrets.get(operator.token_env):
            log.warning(
                "console_operator_cannot_sign_in",
                operator=operator.name,
                why=f"{operator.token_env} is not set",
            )

    inputs = ConsoleInputs(
        settings=settings.console,
        store=store,
        budget=settings.budget,
        timezone=settings.budget.timezone or settings.agent.timezone,
        secrets=dict(config.secrets.values),
        desk=desk,
        runs=runs if settings.schedules.enabled or settings.cron.jobs else None,
        jobs=lambda: [_job(job) for job in jobs()],
        tools=lambda: _offers(offered, hub),
        servers=lambda: _health(hub, tuple(config.secrets.values.values())),
        config_text=lambda: effective_config(config),
    )
    mount(web_app, build_console(inputs), settings.console.path_prefix)
    log.info("console_serving", path=settings.console.path_prefix + "/console/")
    return True


def _offers(offered: tuple[Toolbox, Policies], hub: McpHub | None) -> list[ToolOffer]:
    from bot.cli.tools import offers

    return offers(*offered, hub)


def _job(job: JobPlan) -> JobView:
    return JobView(
        name=job.name,
        expression=job.schedule.expression,
        timezone=job.schedule.timezone,
        enabled=job.enabled,
        notify=str(job.run.notify) if job.run.notify else "",
        origin="config",
    )


def _health(hub: McpHub | None, secrets: tuple[str, ...]) -> list[ServerHealth]:
    if hub is None:
        return []
    counts: dict[str, int] = {}
    for tool in hub.tools():
        counts[tool.info.server] = counts.get(tool.info.server, 0) + 1
    return [
        ServerHealth(
            name=link.name,
            up=link.problem is None and link.name in counts,
            # What a server said may hold a secret it was given.
            problem=redact_text(link.problem, secrets) if link.problem else None,
            tools=counts.get(link.name, 0),
        )
        for link in hub.links
    ]


def effective_config(config: Config) -> str:
    """The settings in force (file, environment and defaults), as JSON, with every value whose
    key names a credential masked and every secret's value redacted; then which secrets are
    set (never their values)."""
    shown = _masked(config.settings.model_dump(mode="json"))
    text = json.dumps(shown, indent=2, ensure_ascii=False)
    names = config.settings.secret_names()
    set_names = [f"  {name}: {'set' if config.secrets.get(name) else 'not set'}" for name in names]
    body = redact_text(text, tuple(config.secrets.values.values()))
    return body + "\n\nSecrets (from the environment only):\n" + "\n".join(set_names)


def _masked(value: object, key: str = "") -> object:
    if isinstance(value, dict):
        return {k: _masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(item, key) for item in value]
    lowered = key.lower()
    # A key ending in _env names a variable, not its value: shown.
    secret = any(word in lowered for word in _SECRET_KEYS) and not lowered.endswith("_env")
    return MASKED if secret and isinstance(value, str) and value else value
