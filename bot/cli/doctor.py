"""`bot doctor`: check the config, the files it names, the database, tokens and each service.

One line per check: `ok`, or `FAIL` with what is wrong and how to fix it. The exit status is
non-zero when anything failed.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import ConfigError

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.config import StoreSettings
    from bot.config.providers import Endpoint
    from bot.mcp.hub import McpTool

HELP = "check config, files, tokens and services"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offline",
        action="store_true",
        help="check only the config, files and tokens' presence; call no service",
    )


def run(args: argparse.Namespace, config: object) -> int:
    import asyncio

    from bot.config import LoggingSettings
    from bot.logs import configure_logging

    # The checks say what is wrong; the parts' own log lines (a server restarting) would only
    # repeat it between them.
    configure_logging(LoggingSettings(level="error"))
    checks = asyncio.run(diagnose(args.config, offline=args.offline))
    width = max(len(check.name) for check in checks)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"{mark}  {check.name:<{width}}  {check.detail}")
    failed = [check for check in checks if not check.ok]
    print(f"\n{len(checks) - len(failed)} ok, {len(failed)} failed")
    return 1 if failed else 0


async def diagnose(path: Path | None, *, offline: bool = False) -> list[Check]:
    from bot.cli.settings import load_config

    try:
        config = load_config(path, verify_files=False)
    except ConfigError as exc:
        return [Check("config", False, str(exc))]
    checks = [Check("config", True, str(config.source or "defaults (no config file)"))]
    checks.append(_files(config))
    if checks[-1].ok:
        checks.append(_policy(config))
    if checks[-1].ok:
        checks.append(_window(config))
    checks.append(_http_port(config))
    checks.extend(_telegram_webhook(config))
    checks.append(_jobs(config))
    checks.append(await _database(config))
    checks.extend(_tokens(config))
    checks.extend(_streaming(config))
    checks.append(await _voice(config))
    checks.append(_traces(config))
    checks.extend(_mcp_secrets(config))
    if not offline:
        for name, probe in _services(config):
            checks.append(await _probe(name, probe))
        checks.extend(await _mcp_servers(config))
    return checks


def _mcp_secrets(config: Config) -> list[Check]:
    """Each variable an MCP server's env or headers_env names: set, or what to do."""
    checks = []
    for server in config.settings.mcp.servers:
        for name in server.secret_names():
            if config.secrets.get(name):
                checks.append(Check(name, True, f"set (for MCP server {server.name!r})"))
            else:
                checks.append(
                    Check(
                        name,
                        False,
                        f"not set; MCP server {server.name!r} names it (env or headers_env). "
                        f"Fix: export {name}=... or add it to .env, or remove it from the server.",
                    )
                )
    return checks


async def _mcp_servers(config: Config) -> list[Check]:
    """Start each MCP server, list its tools, say what is wrong with one that fails. Nothing a
    server says is printed with a secret in it (redacted by value)."""
    if not config.settings.mcp.servers:
        return []
    from bot.cli.compose import build_hub
    from bot.logs import redact_text, remember_secrets

    remember_secrets(config.secrets.values.values())
    hub = build_hub(config)
    await hub.start()
    secrets = tuple(config.secrets.values.values())
    checks = []
    try:
        for link in hub.links:
            name = f"mcp server {link.name}"
            if link.refused:  # past its bounds: the problem says which, and the fix
                detail = f"{link.settings.transport}: {link.problem}."
                checks.append(Check(name, False, redact_text(detail, secrets)))
                continue
            if link.problem is not None:
                fix = (
                    "Fix: check the server's command (and that it speaks MCP over stdio)"
                    if link.settings.command is not None
                    else "Fix: check the url, that the server is up, and its headers_env"
                )
                detail = (
                    f"{link.settings.transport}: {link.problem}. {fix}, or its timeout_seconds."
                )
                checks.append(Check(name, False, redact_text(detail, secrets)))
                continue
            names = ", ".join(tool.tool for tool in link.tools) or "none"
            detail = f"{link.settings.transport}: {len(link.tools)} tool(s): {names}"
            checks.append(Check(name, True, redact_text(detail, secrets)))
        checks.extend(
            Check(f"mcp tool {tool}", False, redact_text(why, secrets))
            for tool, why in sorted(hub.clashes.items())
        )
        checks.extend(_approvers(config, hub.tools()))
    finally:
        await hub.aclose()
    return checks


def _approvers(config: Config, tools: Sequence[McpTool]) -> list[Check]:
    """Every surface rule that offers a tool which waits for an approval must have someone on
    its platform to decide it (the rule's approvers, or `[approvals] approvers`)."""
    from bot.policy.surfaces import offered_tools
    from bot.tools.approvals import needs_approval

    settings = config.settings
    allow = settings.approvals.allow_without_approval
    waiting = sorted(t.spec.name for t in tools if needs_approval(t.info, t.approve, allow))
    if not waiting:
        return []
    problems = []
    for index, rule in enumerate(settings.surfaces):
        offered = [name for name in offered_tools(rule, waiting) if name in waiting]
        listed = rule.approvers if rule.approvers is not None else settings.approvals.approvers
        if offered and not [a for a in listed if a.startswith(f"{rule.platform}:")]:
            problems.append(
                f"surfaces[{index}] ({rule.platform}) offers {', '.join(offered)}, which wait for "
                f"an approval, and no {rule.platform} approver is configured. Fix: add "
                f'"{rule.platform}:<user id>" to [approvals] approvers (or the rule\'s approvers)'
            )
    if problems:
        return [Check("approvals", False, "; ".join(problems))]
    return [Check("approvals", True, f"{len(waiting)} tool(s) wait for an approver: approvers set")]


def _files(config: Config) -> Check:
    from bot.agentfiles import load_agent
    from bot.config import check_files

    try:
        check_files(config.settings)
        agent = load_agent(config.settings.agent)
    except ConfigError as exc:
        return Check("agent files", False, str(exc))
    return Check("agent files", True, f"identity and {len(agent.skills)} skill(s) read")


def _window(config: Config) -> Check:
    """Whether the model's window can fund the prompt's floors (as `bot run` checks it)."""
    from bot.agentfiles import load_agent
    from bot.cli.wiring.agents import build_assembler
    from bot.prompt import TokenCounter

    counter = TokenCounter(
        config.settings.model.encoding, calibration=config.settings.model.calibration
    )
    try:
        assembler = build_assembler(config, load_agent(config.settings.agent), counter)
    except ConfigError as exc:
        return Check("context window", False, str(exc))
    detail = f"{assembler.input_budget} tokens for input, {assembler.fixed_tokens} agent-wide"
    return Check("context window", True, detail)


def _policy(config: Config) -> Check:
    from bot.agentfiles import load_agent
    from bot.policy.files import load_policy

    try:
        load_policy(config.settings, load_agent(config.settings.agent))
    except ConfigError as exc:
        return Check("surfaces and templates", False, str(exc))
    rules = len(config.settings.surfaces)
    return Check("surfaces and templates", True, f"{rules} surface rule(s); templates valid")


def _http_port(config: Config) -> Check:
    """Whether the HTTP port is on where an enabled intake needs it (`bot run` refuses else)."""
    settings = config.settings
    needs = []
    if settings.slack.enabled and settings.slack.mode == "http":
        needs.append("slack.mode = 'http' (Slack posts events to /slack/events)")
    if settings.telegram.enabled and settings.telegram.mode == "webhook":
        needs.append(
            f"telegram.mode = 'webhook' (Telegram posts to {settings.telegram.webhook_path})"
        )
    if settings.http.enabled:
        return Check("http port", True, f"{settings.http.host}:{settings.http.port}")
    if needs:
        detail = (
            f"http.enabled = false, but {' and '.join(needs)} needs the host's HTTP port. "
            "Fix: set http.enabled = true, or use Slack's socket mode and Telegram's polling."
        )
        return Check("http port", False, detail)
    return Check("http port", True, "off (nothing enabled needs it)")


def _telegram_webhook(config: Config) -> list[Check]:
    """In webhook mode, who tells Telegram where to post: the host (webhook_url) or the operator."""
    telegram = config.settings.telegram
    if not (telegram.enabled and telegram.mode == "webhook"):
        return []
    if telegram.webhook_url:
        return [Check("telegram webhook", True, f"{telegram.webhook_url} (set at start-up)")]
    detail = (
        "webhook_url is not set, so the host does not call setWebhook: Telegram posts only if "
        f"it was told elsewhere (a public URL ending in {telegram.webhook_path}, with "
        "TELEGRAM_WEBHOOK_SECRET as secret_token). Fix: set telegram.webhook_url to have the host "
        "register it."
    )
    return [Check("telegram webhook", True, detail)]


def _jobs(config: Config) -> Check:
    """The scheduled jobs and webhooks, checked as `bot run` checks them at start-up."""
    from channels.cron.plan import plan_hooks, plan_jobs

    settings = config.settings
    platforms = settings.platforms()
    try:
        jobs = plan_jobs(settings.cron, platforms)
        hooks = plan_hooks(settings.webhooks, config.secrets, platforms, http=settings.http.enabled)
    except ConfigError as exc:
        return Check("jobs and webhooks", False, str(exc))
    return Check("jobs and webhooks", True, f"{len(jobs)} job(s), {len(hooks)} webhook(s)")


async def _database(config: Config) -> Check:
    """Open the configured store (connecting to PostgreSQL when `store.url` is set) and report
    where it is and its schema version; opening migrates an older schema forward."""
    from bot.cli.stored import open_configured

    settings = config.settings
    where, fix = _store_where(settings.store)
    try:
        store = await open_configured(settings.store, settings.memory)
        try:
            version = await store.schema_version()
        finally:
            await store.aclose()
    except Exception as exc:
        text = str(exc)
        return Check("database", False, text if "Fix:" in text else f"{where}: {text}. Fix: {fix}")
    return Check("database", True, f"{where} (schema version {version})")


def _store_where(settings: StoreSettings) -> tuple[str, str]:
    if settings.url:
        from bot.store.postgres import shown_url

        return shown_url(settings.url), (
            "check that the PostgreSQL server runs and that store.url and PGPASSWORD are right."
        )
    return str(settings.path), (
        "make its folder writable by this user, or point store.path elsewhere."
    )


def _tokens(config: Config) -> list[Check]:
    settings, secrets = config.settings, config.secrets
    endpoints = settings.model_endpoints()
    needed = [
        (e.key_env, "the model" if e.model is None else f"the model {e.label}")
        for e in endpoints
        if e.key_env and e.key_required
    ]
    if settings.slack.enabled:
        needed.append(("SLACK_BOT_TOKEN", "Slack (Web API)"))
        if settings.slack.mode == "socket":
            needed.append(("SLACK_APP_TOKEN", "Slack Socket Mode (an xapp- app-level token)"))
        else:
            needed.append(("SLACK_SIGNING_SECRET", "Slack HTTP mode (request signatures)"))
    if settings.telegram.enabled:
        needed.append(("TELEGRAM_BOT_TOKEN", "Telegram (from @BotFather)"))
        if settings.telegram.mode == "webhook":
            needed.append(("TELEGRAM_WEBHOOK_SECRET", "Telegram webhook mode"))
    needed.extend((hook.token_env, f"webhook {hook.name!r}") for hook in settings.webhooks)
    checks = []
    for name, purpose in needed:
        if secrets.get(name) and (problem := secrets.problem(name)) is not None:
            checks.append(Check(name, False, problem))
        elif secrets.get(name):
            checks.append(Check(name, True, f"set (for {purpose})"))
        else:
            checks.append(
                Check(
                    name,
                    False,
                    f"not set; needed for {purpose}. Fix: export {name}=... or add it to .env.",
                )
            )
    return checks


def _streaming(config: Config) -> list[Check]:
    """Which streaming mode each enabled channel will use, and what it needs."""
    settings = config.settings
    checks = []
    if settings.slack.enabled:
        from channels.slack.stream import MODES as SLACK_MODES

        checks.append(Check("slack-stream", True, SLACK_MODES[settings.slack.stream]))
        from channels.slack.doctor import messaging

        checks.append(Check("slack-messaging", True, messaging(settings.slack)))
    if settings.telegram.enabled:
        from channels.telegram.stream import MODES as TELEGRAM_MODES

        checks.append(Check("telegram-stream", True, TELEGRAM_MODES[settings.telegram.stream]))
    return checks


async def _voice(config: Config) -> Check:
    """Which model transcribes voice notes, and whether it loads (hashed first, loaded from its
    folder: nothing is fetched, so this runs offline too)."""
    import asyncio

    from bot.voice.model import INSTALL, MANIFEST, extra_installed, locate

    voice = config.settings.voice
    if not voice.enabled:
        return Check("voice", True, "off (voice.enabled = false): voice notes get a marker")
    if not extra_installed():
        detail = (
            "not installed: voice notes get a marker saying they were not transcribed. "
            f"Fix: {INSTALL} to transcribe them on this machine."
        )
        return Check("voice", True, detail)
    from bot.voice.whisper import WhisperEngine  # the extra is there: faster-whisper imports

    try:
        files = locate(voice.model)
        await asyncio.to_thread(WhisperEngine, files, workers=1, language=voice.language)
    except ConfigError as exc:
        return Check("voice", False, str(exc))
    except Exception as exc:  # CTranslate2 refused the files
        detail = (
            f"{voice.model}: the model does not load ({type(exc).__name__}: {exc}). Fix: point "
            "voice.model at a CTranslate2 Whisper model folder, or set it to 'bundled'."
        )
        return Check("voice", False, detail)
    checked = "its files match their sha256" if files.verified else f"not verified: no {MANIFEST}"
    return Check("voice", True, f"{files.name} loads ({checked}); up to {voice.max_seconds} s")


def _traces(config: Config) -> Check:
    """Where `[otel]` sends each turn's trace, and whether the extra that exports it is there
    (`bot run` refuses to start without it). No credential of the endpoint, no header value."""
    import os

    from bot import tracing

    otel = config.settings.otel
    if otel.endpoint is None:
        return Check("traces", True, "off (otel.endpoint is not set): no traces are exported")
    where = tracing.traces_url(tracing.shown_url(otel.endpoint))
    if not tracing.available():
        detail = (
            f"otel.endpoint is set ({where}), but the OpenTelemetry packages are not installed, "
            "so `bot run` will not start. Fix: pip install -e '.[otel]' (the otel extra), or "
            "remove otel.endpoint."
        )
        return Check("traces", False, detail)
    content = "message content on spans" if otel.content else "no message content"
    headers = [name for name in tracing.HEADER_VARIABLES if os.environ.get(name)]
    sent = f"; headers from {', '.join(headers)}" if headers else ""
    detail = (
        f"OTLP/HTTP to {where} as service {otel.service_name!r} ({content}{sent}); "
        "otel extra installed"
    )
    return Check("traces", True, detail)


Probe = Callable[[], Awaitable[str]]


def _services(config: Config) -> list[tuple[str, Probe]]:
    settings, secrets = config.settings, config.secrets
    services: list[tuple[str, Probe]] = []
    for endpoint in settings.model_endpoints():
        key = secrets.get(endpoint.key_env or "")
        if (key and secrets.problem(endpoint.key_env or "") is None) or not endpoint.key_required:
            name = "model" if endpoint.model is None else f"model {endpoint.label}"
            services.append((name, functools.partial(_check_model, config, endpoint, key)))
    if settings.slack.enabled and secrets.get("SLACK_BOT_TOKEN"):
        from channels.slack.doctor import check_slack

        services.append(("slack", lambda: check_slack(settings.slack, secrets)))
    if settings.telegram.enabled and secrets.get("TELEGRAM_BOT_TOKEN"):
        from channels.telegram.channel import check_token

        services.append(("telegram", lambda: check_token(settings.telegram, secrets)))
    return services


async def _probe(name: str, probe: Probe) -> Check:
    try:
        return Check(name, True, await probe())
    except Exception as exc:
        return Check(name, False, str(exc) or type(exc).__name__)


async def _check_model(config: Config, endpoint: Endpoint, key: str | None) -> str:
    """An Anthropic model answers a one-token ping; an OpenAI-compatible server must accept the
    key and list the model (GET /models: free, and what a local server answers first)."""
    from bot.model import ModelClient
    from bot.model.retry import WireError, error_message
    from bot.model.runtime import transport_for

    settings = config.settings.model
    if endpoint.model is None and endpoint.wire == "anthropic":
        runtime = ModelClient(settings, key or "")
        try:
            await runtime.ping()
        finally:
            await runtime.aclose()
        return f"{settings.name} answered"
    model = endpoint.model or settings.name
    transport: Any = transport_for(
        endpoint.wire,
        endpoint.base_url,
        endpoint.capabilities,
        key or "unused",
        settings.timeout,
        None,
    )
    try:
        listed = await transport.models() if endpoint.wire == "openai" else None
        if listed is None:
            await transport.ping(model)
    except (WireError, TimeoutError) as exc:
        fix = f"check {endpoint.key_env}" if endpoint.key_env else "check the key"
        raise RuntimeError(
            f"{transport.base_url} failed ({error_message(exc)}). Fix: {fix} and the base_url."
        ) from None
    finally:
        await transport.aclose()
    if listed is None:
        return f"{model} answered"
    if model not in listed:
        shown = ", ".join(listed[:10]) or "none"
        raise RuntimeError(
            f"{transport.base_url} does not list model {model!r} (it lists: {shown}). Fix: set "
            "the model name to one it serves (for a local server, pull or load the model first)."
        )
    return f"{transport.base_url} is reachable, accepts the key and lists {model}"
