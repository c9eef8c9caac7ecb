"""`bot preview EVENT.json [--wire anthropic|openai]`: print the exact request the model would get
for an event, on the configured model's wire or the one named.

No model call is made. The event file names the channel, conversation, kind and text, and
optionally the speaker, surface, preceding messages and route (host-side values, which must not
appear in the output: that is the point of looking). Stored history and recalled memory are
included when the configured database exists; it is never created here.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import BadInput, UnknownSkill
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
)

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.mcp.hub import McpHub
    from bot.prompt.skills import AgentTexts

if TYPE_CHECKING:  # `bot preview --help` imports no config model
    from bot.config import ModelSettings
    from bot.ports.model import ModelRef
    from bot.ports.request import ModelRequest

HELP = "print the exact model request for an event file"
# The channels a turn comes from (each one's `channel` in its TurnRequest).
CHANNELS = ("slack", "telegram", "console", "cron", "webhook")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", type=Path, help="a JSON event file (see README: bot preview)")
    parser.add_argument(
        "--wire",
        choices=("anthropic", "openai"),
        help="the wire to show the request on (default: model.provider's)",
    )


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    try:
        raw = json.loads(args.event.read_text(encoding="utf-8"))
        request = parse_event(raw)
    except OSError as exc:
        print(f"bot preview: cannot read {args.event}: {exc.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(
            f"bot preview: {args.event} is not UTF-8 text (byte {exc.start} is "
            f"0x{exc.object[exc.start]:02x}). Fix: save the event file as UTF-8.",
            file=sys.stderr,
        )
        return 2
    except json.JSONDecodeError as exc:
        print(f"bot preview: {args.event} is not valid JSON: {exc}", file=sys.stderr)
        return 2
    except BadInput as exc:  # a ValueError too: caught first, it is the content that is wrong
        print(f"bot preview: {args.event}: {exc}", file=sys.stderr)
        return 2
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting past the limit
        print(f"bot preview: {args.event} is not usable JSON: {exc}", file=sys.stderr)
        return 2
    command = host_command(request.text, schedules=config.settings.schedules.enabled)
    if command is not None:
        print(
            f"bot preview: {args.event}: {command} is a command the host answers itself, so no "
            "model request is made for it.",
            file=sys.stderr,
        )
        return 2
    try:
        body, rule = asyncio.run(_preview(config, request, args.wire))
    except UnknownSkill as exc:
        # The host answers such a message itself; the model is never asked.
        print(
            f"bot preview: {args.event}: /{exc.name} names no skill, so no model request is made; "
            f"the host answers: {exc}",
            file=sys.stderr,
        )
        return 2
    # The rule goes to stderr so stdout stays exactly the request body (JSON).
    print(f"surface rule: {rule}", file=sys.stderr)
    print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0


def host_command(text: str, *, schedules: bool) -> str | None:
    """The command `text` is when the host answers it itself, never the model (SPEC §6): /memory,
    /forget, /usage, /schedules (where schedules from chat are on), /help, /start, /compact."""
    from bot.host.memory_commands import is_memory_command
    from bot.host.schedule_commands import is_schedules_command
    from bot.prompt.skills import host_command as turn_command

    words = text.split(maxsplit=1)
    first = words[0].lower() if words else ""
    if is_memory_command(text) or first == "/usage" or (schedules and is_schedules_command(text)):
        return first
    name = turn_command(text)
    return f"/{name}" if name is not None else None


async def _preview(
    config: Config, request: TurnRequest, wire: str | None = None
) -> tuple[Mapping[str, Any], str]:
    """The request body on `wire` (the configured model's by default), and which surface rule
    applied."""
    from bot.agentfiles import load_agent
    from bot.cli.compose import build_hub

    agent = load_agent(config.settings.agent)
    hub = build_hub(config) if config.settings.mcp.servers else None
    if hub is not None:  # their tools are offered too, as `bot tools` lists them
        await hub.start()
    try:
        return await _previewed(config, request, agent, hub, wire)
    finally:
        if hub is not None:
            await hub.aclose()


async def _previewed(
    config: Config,
    request: TurnRequest,
    agent: AgentTexts,
    hub: McpHub | None,
    wire: str | None,
) -> tuple[Mapping[str, Any], str]:
    from bot.cli.wiring.agents import build_assembler, build_toolbox
    from bot.policy.files import load_policy
    from bot.prompt import TokenCounter
    from bot.turnprep import memory_scope, surface_prompt

    settings = config.settings
    policy = load_policy(settings, agent)
    matched = policy.policies.for_request(request)
    toolbox = build_toolbox(config, agent, hub=hub, listing=True)
    assembler = build_assembler(
        config,
        agent,
        TokenCounter(settings.model.encoding, calibration=settings.model.calibration),
        policy,
        toolbox,
    )
    words = assembler.words(request)
    history: list[HistoryEntry] = []
    hits: list[Any] = []
    if settings.store.url or settings.store.path.exists():
        from bot.cli.stored import open_configured

        store = await open_configured(settings.store, settings.memory)
        try:
            history = await store.history.load(request.conversation_key)
            if settings.memory.enabled:
                hits = list(await store.memory.recall(words, memory_scope(request)))
        finally:
            await store.aclose()
    # The tools this surface is offered, computed as `bot tools --surface` computes them (and as
    # the host does for a turn), so the request, its skill index included, says what is offered.
    surface = replace(surface_prompt(matched), tools=tuple(toolbox.offered(matched.rule)))
    prepared = assembler.prepare(request, history, hits, surface=surface)
    assembled = assembler.build(prepared.prompt, history)
    encoded = _encoded(settings.model, assembled.request, wire, matched.models)
    return encoded, matched.label


def _encoded(
    model: ModelSettings, request: ModelRequest, wire: str | None, models: Sequence[ModelRef]
) -> dict[str, Any]:
    """The request as `wire` sends it (default: the wire of the surface rule's model, else
    `[model]`'s); no SDK is imported for this."""
    ref = models[0] if models else None
    if (wire or (ref.wire if ref else model.provider)) == "openai":
        from bot.config.providers import Capabilities
        from bot.model import openai_wire

        if ref is not None and ref.wire == "openai":
            caps = Capabilities(images=ref.images, documents=ref.documents, tools=ref.tools)
            base_url = ref.base_url
        else:
            caps = model.capabilities.on("openai")
            base_url = model.base_url if model.provider == "openai" else None
        tokens = openai_wire.completion_tokens(base_url)
        return openai_wire.encode(request, caps, completion_tokens=tokens)
    from bot.config.providers import Capabilities as Caps
    from bot.model import capable
    from bot.model import wire as anthropic_wire

    if ref is not None and ref.wire == "anthropic":
        accepted = Caps(images=ref.images, documents=ref.documents, tools=ref.tools)
    else:
        accepted = model.capabilities.on("anthropic")
    return anthropic_wire.encode(capable.within(request, accepted))


@dataclass(frozen=True)
class _Reader:
    raw: Mapping[str, Any]
    where: str = ""

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise BadInput(f'{self.where}{key} is missing. Fix: add "{key}": "...".')
            return None
        if not isinstance(value, str | int):
            raise BadInput(f"{self.where}{key} must be a string, got {type(value).__name__}.")
        return str(value)

    def child(self, key: str) -> _Reader | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise BadInput(f"{self.where}{key} must be an object {{...}}.")
        return _Reader(value, f"{self.where}{key}.")


def parse_event(raw: Any) -> TurnRequest:
    """Turn a preview event (see module docstring) into the TurnRequest a channel would build."""
    if not isinstance(raw, dict):
        raise BadInput("the event must be a JSON object.")
    event = _Reader(raw)
    channel = event.text("channel", required=True) or ""
    if channel not in CHANNELS:
        raise BadInput(
            f"channel = {channel!r} is not one of {', '.join(CHANNELS)}. "
            'Fix: name the channel the event comes from, e.g. "channel": "slack".'
        )
    kind_name = event.text("kind") or ("console" if channel == "console" else "push")
    try:
        kind = ConversationKind(kind_name)
    except ValueError:
        raise BadInput(f"kind = {kind_name!r} is not one of push, console, request.") from None
    conversation = event.text("conversation") or f"{channel}:{uuid.uuid4()}"
    speaker_raw = event.child("speaker")
    speaker = person = None
    if speaker_raw is not None:
        speaker = Speaker(speaker_raw.text("name", required=True) or "", speaker_raw.text("handle"))
        user_id = speaker_raw.text("id")
        person = _channel_person(channel, conversation, speaker_raw)(user_id) if user_id else None
    route_raw = raw.get("route")
    if route_raw is not None and not isinstance(route_raw, dict):
        raise BadInput("route must be an object of host-side values.")
    return TurnRequest(
        conversation_key=conversation,
        kind=kind,
        channel=channel,
        text=event.text("text", required=True) or "",
        received_at=_time(at) if (at := event.text("at")) else datetime.now(UTC),
        turn_id=uuid.uuid4().hex,
        speaker=speaker,
        surface=_surface(event.child("surface"), channel),
        preceding=tuple(_preceding(raw.get("preceding") or [])),
        route=ReplyRoute(channel, dict(route_raw or {})),
        person=person,
        notifies=bool(raw.get("notify", False)),
    )


def _surface(reader: _Reader | None, channel: str) -> Surface | None:
    if reader is None:
        return None
    kind_name = reader.text("kind", required=True) or ""
    try:
        kind = SurfaceKind(kind_name)
    except ValueError:
        raise BadInput(f"surface.kind = {kind_name!r} is not one of dm, channel, group.") from None
    surface_id = reader.text("id", required=True) or ""
    return _channel_surface(channel)(kind, surface_id, reader.text("name"))


def _preceding(items: Any) -> list[PrecedingMessage]:
    if not isinstance(items, list):
        raise BadInput("preceding must be a list of messages.")
    messages = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadInput(f"preceding[{index}] must be an object.")
        reader = _Reader(item, f"preceding[{index}].")
        messages.append(
            PrecedingMessage(
                at=_time(reader.text("at", required=True) or ""),
                name=reader.text("name", required=True) or "",
                text=reader.text("text", required=True) or "",
                handle=reader.text("handle"),
            )
        )
    return messages


def _time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"{value!r} is not an ISO 8601 timestamp.") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _channel_person(channel: str, conversation: str, speaker: _Reader) -> Callable[[str], str]:
    """The channel's own person id (what memory is attributed to), so recall in the preview
    matches the live channel's. Slack's includes the team: `speaker.team`, else the key's."""
    if channel == "slack":
        from channels.slack.events import person_id as slack_person

        parts = conversation.split(":")
        team = speaker.text("team") or (parts[1] if len(parts) > 1 else "")
        return lambda user: slack_person(team, user)
    if channel == "telegram":
        from channels.telegram.mapping import person_id as telegram_person

        return telegram_person
    return lambda user: f"{channel}:{user}"


def _channel_surface(channel: str) -> Callable[[SurfaceKind, str, str | None], Surface]:
    """The channel's own way of describing a surface (budget, platform, threading), so the
    preview shows exactly what that channel would send."""
    if channel == "slack":
        from channels.slack.names import surface as slack_surface

        return slack_surface
    if channel == "telegram":
        from channels.telegram.mapping import surface as telegram_surface

        return telegram_surface

    def plain(kind: SurfaceKind, surface_id: str, name: str | None) -> Surface:
        return Surface(kind, surface_id, name, shared=kind is not SurfaceKind.DM)

    return plain
