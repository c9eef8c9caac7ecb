"""The composition root: settings -> model -> store -> MCP servers -> channels -> host -> cron ->
HTTP port.

The one place that imports everything. `App` is built from a list of channel builders and what
the command runs (`Runs`); entering builds the parts, hands the host and cron the platform ->
deliverer mapping, and starts the HTTP server and the channels; leaving stops intake first, lets
running turns finish up to the shutdown grace, then closes the channels, the HTTP server, the
MCP servers, the store and the model client.
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import structlog
from aiohttp import web

from bot.agents import Roster
from bot.attachments.intake import AttachmentIntake
from bot.cli.settings import Config, Settings
from bot.cli.stored import open_configured
from bot.cli.wiring.agents import (
    AgentParts,
    agent_texts,
    build_agents,
    build_toolbox,
)
from bot.cli.wiring.approvals import connect_approvals
from bot.cli.wiring.console import install_console
from bot.cli.wiring.cron import prepare_cron, schedule_desk
from bot.cli.wiring.heap import freeze_started, thaw
from bot.cli.wiring.model import build_model, verify_model
from bot.cli.wiring.serving import Health, listening_port, start_http, start_tracing
from bot.cli.wiring.starting import ChannelStarts
from bot.config.providers import Endpoint
from bot.errors import ConfigError
from bot.host import Host
from bot.host.inputs import HostStores, Mind, Outlets, Thinking, ToolsFor, TurnRules
from bot.httpguard import guard
from bot.logs import remember_secrets
from bot.memory.departures import MemoryDepartures
from bot.metrics import Metrics
from bot.policy.budget import Budgets, SpendCaps
from bot.policy.files import Policy, load_policy
from bot.ports.attachments import AttachmentStore
from bot.ports.delivery import Deliverer
from bot.ports.intake import Channel, RequestCompleter
from bot.ports.memory import Departures
from bot.ports.model import ModelRuntime
from bot.ports.stores import OpenStore, RunRecords
from bot.prompt import TokenCounter
from bot.tools.approvals import ApprovalDesk
from bot.tools.toolbox import Toolbox
from bot.voice.local import build_transcriber

if TYPE_CHECKING:
    from bot.mcp.hub import McpHub
    from channels.cron.plan import JobPlan
    from channels.cron.runner import CronRunner
    from channels.cron.scheduler import CronScheduler
    from channels.cron.webhook import WebhookEndpoint

log = structlog.get_logger(__name__)


def require_api_key(config: Config, endpoint: Endpoint | None = None) -> str:
    """The key of `endpoint` (the configured model's by default); a local OpenAI-compatible
    server that needs none gets a placeholder."""
    endpoint = endpoint or config.settings.model.home
    name = endpoint.key_env or ""
    key = config.secrets.get(name) if name else None
    if not key:
        if not endpoint.key_required:
            return "unused"
        where = "model" if endpoint.model is None else f"model {endpoint.label}"
        raise ConfigError(
            f"{name} is not set (the key for the {where}). Fix: export {name}=... or put it "
            "in a .env file next to where you run `bot` (it is read from the environment only)."
        )
    problem = config.secrets.problem(name)
    if problem is not None:
        raise ConfigError(problem)
    return key


def build_hub(config: Config) -> McpHub:
    """The configured MCP servers (not started), with the secrets their env and headers name."""
    from bot.mcp.hub import McpHub

    return McpHub(config.settings.mcp, config.secrets.values)


@dataclass(frozen=True)
class Runs:
    """What a command runs besides the host, the store and its channels."""

    http: bool = True  # the HTTP port: /healthz, /metrics, webhooks, Slack HTTP, Telegram webhook
    scheduler: bool = True  # cron jobs fire on their schedules
    intake: bool = True  # channels take events (off: they only deliver, beside a running host)
    resume: bool = True  # run what an earlier process left (pending turns, undelivered parts)
    check_model: bool = False  # a refused API key stops start-up (exit 2, with the fix)


RUN = Runs(check_model=True)
# `bot chat`: the console only; what other channels left waits for their own host.
CHAT = Runs(http=False, scheduler=False, resume=False, check_model=True)
# `bot cron run`: one job by hand; a running `bot run` keeps its own schedule and events.
CRON_RUN = Runs(http=False, scheduler=False, intake=False, resume=False)


@dataclass(frozen=True)
class Parts:
    """What the root opened that a channel may need."""

    config: Config
    store: OpenStore
    http: web.Application | None  # None when the HTTP port is off
    departures: Departures
    tls: ssl.SSLContext  # the one TLS client context every HTTPS client shares


ChannelBuilder = Callable[[Parts], Channel]


def ready(channel: Channel) -> ChannelBuilder:
    """A channel built before the app (the console), as a builder."""
    return lambda parts: channel


def configured_channels(settings: Settings) -> list[ChannelBuilder]:
    """The platform channels the configuration enables."""
    builders: list[ChannelBuilder] = []
    if settings.slack.enabled:
        builders.append(_slack)
    if settings.telegram.enabled:
        builders.append(_telegram)
    return builders


def _slack(parts: Parts) -> Channel:
    from channels.slack.channel import SlackChannel

    settings, secrets = parts.config.settings.slack, parts.config.secrets
    pairing = parts.store.access if parts.config.settings.access.pairing else None
    return SlackChannel(
        settings,
        secrets,
        parts.http,
        departures=parts.departures,
        tls=parts.tls,
        pairing=pairing,
    )


def _telegram(parts: Parts) -> Channel:
    from channels.telegram.channel import TelegramChannel

    return TelegramChannel(
        parts.config.settings.telegram,
        parts.config.secrets,
        parts.http,
        buffer=parts.store.buffer,
        departures=parts.departures,
        leader=parts.store.leadership,
        tls=parts.tls,
        schedules=parts.config.settings.schedules.enabled,
        pairing=parts.store.access if parts.config.settings.access.pairing else None,
    )


def client_tls() -> ssl.SSLContext:
    """The process's TLS client context: the system's CAs, SSL_CERT_FILE / SSL_CERT_DIR honoured
    as they are now. Building one reads the whole CA bundle (tens of milliseconds of CPU), so one
    is built per process and CA setting and shared, by an App's HTTPS clients and by every App of
    the process (replicas in one process, a test session's many)."""
    return _client_tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _client_tls(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """Keyed by the variables `ssl.create_default_context` reads (through OpenSSL)."""
    return ssl.create_default_context()


class App:
    """Everything one command runs: the store, the host, `channels` and what `runs` asks for,
    started and stopped in the right order."""

    def __init__(
        self,
        config: Config,
        channels: Sequence[ChannelBuilder] | None = None,
        runs: Runs = Runs(),
        *,
        model: ModelRuntime | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`channels`: None for the ones the configuration enables. `clock`: unix seconds for
        approvals' expiry (tests pass their own)."""
        self.config = config
        remember_secrets(config.secrets.values.values())  # turn records and logs redact them
        self._builders = configured_channels(config.settings) if channels is None else channels
        self._runs = runs
        self._model_override = model
        self._clock = clock
        self.approvals: ApprovalDesk | None = None
        self.cron: CronScheduler | None = None
        self.cron_runner: CronRunner | None = None
        self.cron_jobs: list[JobPlan] = []
        self._records: RunRecords | None = None
        self.webhooks: WebhookEndpoint | None = None
        self.mcp: McpHub | None = None
        self.channels: list[Channel] = []
        self.web = web.Application(middlewares=[guard])
        self._runner: web.AppRunner | None = None
        self._store: OpenStore | None = None
        self._host: Host | None = None
        self._exits = contextlib.AsyncExitStack()
        self._starts = ChannelStarts((), self._exits)

    @property
    def host(self) -> Host:
        assert self._host is not None, "App is not started"
        return self._host

    @property
    def store(self) -> OpenStore:
        assert self._store is not None, "App is not started"
        return self._store

    @property
    def http_port(self) -> int | None:
        return listening_port(self._runner)

    async def __aenter__(self) -> App:
        try:
            await self._start()
        except BaseException:
            await self._exits.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._exits.aclose()

    def _model_keys(self) -> list[tuple[Endpoint, str]]:
        """The model's endpoint and each fallback's, with its key."""
        endpoints = self.config.settings.model_endpoints()
        return [(e, require_api_key(self.config, e)) for e in endpoints]

    async def _start(self) -> None:
        settings = self.config.settings
        start_tracing(settings.otel, self._exits)
        roster = Roster.of(settings)
        policy = load_policy(settings, agent_texts(self.config, roster.default))
        # One counter: the runtime refines its calibration from the API's usage, and the
        # assembler's budget estimates follow.
        counter = TokenCounter(settings.model.encoding, calibration=settings.model.calibration)
        # One TLS client context for the model API, Slack and Telegram (see client_tls).
        tls = client_tls()
        model = self._model_override or build_model(
            settings.model, self._model_keys(), counter, tls, settings.providers
        )
        self._exits.push_async_callback(model.aclose)
        if self._runs.check_model:
            await verify_model(model)
        store = await open_configured(
            settings.store,
            settings.memory,
            attachments=settings.attachments,
        )
        self._store = store
        self._exits.push_async_callback(store.aclose)
        approvals = ApprovalDesk(
            store.approvals, settings.approvals, **({"clock": self._clock} if self._clock else {})
        )
        self.approvals = approvals
        # Channels add their routes whenever the port is configured, so a command that does not
        # serve it (`bot cron run`) accepts the same config as `bot run`.
        http = self.web if settings.http.enabled else None
        departures = MemoryDepartures(store.memory if settings.memory.enabled else None)
        parts = Parts(self.config, store, http, departures, tls)
        self.channels = [build(parts) for build in self._builders]
        self._starts = ChannelStarts(self.channels, self._exits)
        deliverers = {channel.name: channel.deliverer for channel in self.channels}
        hub = await self._start_mcp()
        desk = await schedule_desk(self.config, self._run_records, self._schedules_changed)
        agents = build_agents(
            self.config,
            roster,
            counter,
            policy,
            lambda texts: build_toolbox(self.config, texts, store.attachments, hub, desk),
        )
        toolbox = agents[roster.default.name].toolbox
        self._host = self._build_host(policy, roster, agents, model, store, deliverers)
        Health(
            self._channels_up,
            self._draining,
            self.metrics,
            down=lambda: self._starts.problems,
            mcp=lambda: {link.name: link.problem for link in hub.links} if hub else {},
        ).install(self.web)
        await self._prepare_cron(deliverers)
        if http is not None and self._runs.http:
            self._install_console(store, hub, toolbox, policy)
            self._runner = await start_http(self.web, settings.http, self._exits)
        elif self._runs.http and settings.console.enabled:
            log.warning("console_off", why="[http] enabled = false: the console needs the port")
        stop_approvals = connect_approvals(
            approvals,
            self._host,
            self.channels,
            hub,
            sweeps=self._runs.intake and self._runs.resume,
        )
        await self._start_channels(self._host)
        # Leaving: the expiry sweep stops before the host closes.
        self._exits.push_async_callback(stop_approvals)
        await self._start_cron()
        freeze_started()  # the start-up heap stays out of full collections
        self._exits.callback(thaw)

    def _install_console(
        self, store: OpenStore, hub: McpHub | None, toolbox: Toolbox, policy: Policy
    ) -> None:
        install_console(
            self.web,
            self.config,
            store,
            desk=self.approvals,
            runs=self._run_records,
            jobs=lambda: self.cron_jobs,
            offered=(toolbox, policy.policies),
            hub=hub,
        )

    def _schedules_changed(self) -> None:
        if self.cron is not None:
            self.cron.changed()

    async def _run_records(self) -> RunRecords:
        """The store's cron records (runs, slots, pauses, chat schedules), opened once."""
        if self._records is None:
            self._records = await self.store.cron_runs()
            self._exits.push_async_callback(self._records.aclose)
        return self._records

    async def _start_mcp(self) -> McpHub | None:
        """Start the MCP servers (a server that fails keeps being retried; the host serves on).
        Leaving stops them after the host has let running turns finish."""
        if not self.config.settings.mcp.servers:
            return None
        hub = build_hub(self.config)
        self._exits.push_async_callback(hub.aclose)
        await hub.start()
        self.mcp = hub
        return hub

    def _build_host(
        self,
        policy: Policy,
        roster: Roster,
        agents: Mapping[str, AgentParts],
        model: ModelRuntime,
        store: OpenStore,
        deliverers: Mapping[str, Deliverer],
    ) -> Host:
        settings = self.config.settings
        budgets = Budgets(
            settings.budget,
            store.usage,
            timezone=settings.agent.timezone,
            default_model=settings.model.name,
        )
        minds = {
            name: Mind(one.assembler, self._gated(one.toolbox)) for name, one in agents.items()
        }
        default = minds[roster.default.name]
        host = Host(
            thinking=Thinking(default.assembler, model, default.tools_for, roster, minds),
            stores=HostStores(
                history=store.history,
                inbox=store.inbox,
                outbox=store.outbox,
                memory=store.memory if settings.memory.enabled else None,
                attachments=self._attachment_intake(store),
                schedules=self._records if settings.schedules.enabled else None,
                share=store.share,
            ),
            outlets=Outlets(
                deliverers,
                {c.name: c for c in self.channels if isinstance(c, RequestCompleter)},
            ),
            settings=settings.host,
            rules=TurnRules(
                policies=policy.policies,
                budgets=budgets,
                caps=SpendCaps(
                    turn=settings.budget.max_tokens_per_turn,
                    run=settings.cron.max_tokens_per_run,
                    job_day=settings.cron.max_tokens_per_job_per_day,
                ),
                operators=frozenset(settings.budget.operators),
            ),
            resumers={"approval": self.approvals} if self.approvals is not None else {},
        )
        self.metrics = Metrics(
            lambda: host.queue_depth,
            self._channels_up,
            cost=budgets.cost_of,
            mcp_servers=frozenset(server.name for server in settings.mcp.servers),
        )
        host.observers.append(self.metrics.observe)
        if self.approvals is not None:
            self.approvals.observers.append(self.metrics.count_approval)
        return host

    def _gated(self, toolbox: Toolbox) -> ToolsFor:
        """The toolbox's tools for a turn, each that needs an approval gated."""
        if self.approvals is None:
            return toolbox.for_turn
        return self.approvals.gate(toolbox.for_turn)

    def _attachment_intake(self, store: OpenStore) -> AttachmentIntake | None:
        attachment_store: AttachmentStore | None = store.attachments
        if attachment_store is None:
            return None
        sources = {c.name: c.files for c in self.channels if c.files is not None}
        transcriber = build_transcriber(self.config.settings.voice)
        return AttachmentIntake(
            attachment_store, self.config.settings.attachments, sources, transcriber
        )

    async def _start_channels(self, host: Host) -> None:
        await self._starts.start(host, intake=self._runs.intake)
        # Leaving runs these in reverse: the host stops intake (channels then answer 503, stop
        # acknowledging and stop polling), finishes (or cancels) running turns and posts what is
        # left in the outbox while channels can still deliver; then channels, HTTP, store close.
        self._exits.push_async_callback(host.close)
        if self._runs.resume and self._runs.intake:
            # What an earlier process left (pending turns, undelivered parts) runs now, ahead of
            # anything accepted since the channels started.
            await host.resume()

    async def _prepare_cron(self, deliverers: Mapping[str, Deliverer]) -> None:
        cron = await prepare_cron(
            self.config,
            self.host,
            deliverers,
            self._run_records,
            self.web,
            http=self._runs.http,
            scheduler=self._runs.scheduler,
        )
        if cron is not None:
            self.cron_jobs, self.cron_runner = cron.jobs, cron.runner
            self.webhooks, self.cron = cron.webhooks, cron.scheduler

    async def _start_cron(self) -> None:
        """Start the scheduler after the channels; leaving stops it (and webhooks) first."""
        grace = self.config.settings.host.shutdown_grace
        if self.webhooks is not None:
            self._exits.push_async_callback(self.webhooks.stop, grace)
        if self.cron is not None:
            await self.cron.start()
            self._exits.push_async_callback(self.cron.stop, grace)

    def _draining(self) -> bool:
        return self._host is not None and self._host.draining

    def _channels_up(self) -> dict[str, bool]:
        return {c.name: c.connected for c in self.channels}
