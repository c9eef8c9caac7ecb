"""`bot tools [--surface PLATFORM[:KIND[:ID]]]`: what each surface is offered.

Starts the configured MCP servers (to read their tool lists), then prints, for every
`[[surfaces]]` rule and for surfaces no rule matches (or for the one surface named), the tools
offered there: the names the model sees, with the server's hints (read-only, destructive).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.turns import ConversationKind, Surface, SurfaceKind, TurnRequest

if TYPE_CHECKING:  # the MCP SDK and the rest are imported where they run: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.console.inputs import ToolOffer
    from bot.mcp.hub import McpHub
    from bot.policy.surfaces import Policies, SurfacePolicy
    from bot.tools.toolbox import Toolbox

HELP = "list the tools each surface is offered (MCP servers' and the host's own)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--surface",
        metavar="PLATFORM[:KIND[:ID]]",
        help="one surface, e.g. slack:channel:C0123ABCD or telegram:dm (default: every rule)",
    )


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    return asyncio.run(_run(config, args.surface))


async def _run(config: Config, surface: str | None) -> int:
    from bot.agentfiles import load_agent
    from bot.cli.compose import build_hub
    from bot.cli.wiring.agents import build_toolbox
    from bot.logs import redact_text
    from bot.policy.files import load_policy

    agent = load_agent(config.settings.agent)
    policies = load_policy(config.settings, agent).policies
    hub = build_hub(config)
    await hub.start()
    try:
        toolbox = build_toolbox(config, agent, hub=hub, listing=True)
        secrets = tuple(config.secrets.values.values())
        for link in hub.links:
            if link.problem is not None:  # what a server said may hold a secret it was given
                problem = redact_text(link.problem, secrets)
                print(f"warning: MCP server {link.name!r}: {problem} (its tools are unknown)")
        chosen = [policies.for_request(_request(surface))] if surface is not None else None
        for offer in offers(toolbox, policies, hub, chosen):
            _show(offer)
    finally:
        await hub.aclose()
    return 0


def _hints(hub: McpHub) -> dict[str, str]:
    """The hints of each MCP tool by name (`read-only`, `destructive`), from the hub's lists."""
    hints = {}
    for tool in hub.tools():
        info = tool.info
        marks = ["read-only"] if info.read_only else []
        marks += ["destructive"] if info.destructive and not info.read_only else []
        hints[info.name] = ", ".join(marks)
    return hints


def offers(
    toolbox: Toolbox,
    policies: Policies,
    hub: McpHub | None,
    chosen: Sequence[SurfacePolicy] | None = None,
) -> list[ToolOffer]:
    """What each surface rule (and a surface no rule matches) is offered, or only `chosen`:
    the names the model sees, each with its server's hints. `bot tools` prints these and the
    console shows them."""
    from bot.console.inputs import ToolOffer
    from bot.policy.surfaces import NO_POLICY

    hints = _hints(hub) if hub is not None else {}
    listed = chosen if chosen is not None else [*policies.all, NO_POLICY]
    return [
        ToolOffer(
            policy.label,
            tuple((spec.name, hints.get(spec.name, "")) for spec in toolbox.offered(policy.rule)),
        )
        for policy in listed
    ]


def _show(offer: ToolOffer) -> None:
    print(f"{offer.label}:")
    if not offer.tools:
        print("  (no tools)")
    for name, mark in offer.tools:
        print(f"  {name}{f'  ({mark})' if mark else ''}")


def _request(surface: str) -> TurnRequest:
    from bot.policy.surfaces import ANY_PLATFORM, PLATFORMS

    platform, _, rest = surface.partition(":")
    kind_text, _, surface_id = rest.partition(":")
    if platform not in PLATFORMS or platform == ANY_PLATFORM:
        known = ", ".join(name for name in PLATFORMS if name != ANY_PLATFORM)
        raise ConfigError(
            f"--surface {surface!r}: {platform!r} is not a platform this host runs. Fix: write "
            f"PLATFORM[:KIND[:ID]] with PLATFORM one of {known}."
        )
    try:
        kind = SurfaceKind(kind_text) if kind_text else None
    except ValueError:
        raise ConfigError(
            f"--surface {surface!r}: {kind_text!r} is not a surface kind. Fix: write "
            "PLATFORM[:KIND[:ID]] with KIND one of dm, channel, group."
        ) from None
    where = Surface(kind, surface_id or "-") if kind is not None else None
    return TurnRequest(
        f"{platform}:tools",
        ConversationKind.PUSH,
        platform,
        "",
        datetime.now(UTC),
        "tools",
        surface=where,
    )
