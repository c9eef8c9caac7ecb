"""The composition root: settings -> model -> store -> MCP servers -> channels -> host -> cron ->
HTTP port.

The one place that imports everything. `App` is built from a list of channel builders and what
the command runs (`Runs`); entering builds the parts, hands the host and cron the platform ->
deliverer mapping, and starts the HTTP server and the channels; leaving stops intake first, lets
running turns finish up to the shutdown grace, then closes the channels, the HTTP server, the
MCP servers, the store and the model client.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from bot import tracing
from bot.agentfiles import load_agent
from bot.approvals import ApprovalDesk
from bot.attachments.intake import AttachmentIntake
from bot.budget import Budgets, SpendCaps
from bot.cli.settings import Config, Settings
from bot.cli.stored import open_configured
from bot.departures import MemoryDepartures
from bot.errors import ConfigError
from bot.host import Host
from bot.host.parts import HostStores, Outlets, Thinking, TurnRules
from bot.httpguard import guard
from bot.inbox import RequestCompleter
from bot.logs import remember_secrets
from bot.metrics import CONTENT_TYPE, Metrics
from bot.policyfiles import Policy, load_policy
from bot.ports.approvals import ApprovalCards
from bot.ports.attachments import AttachmentStore
from bot.ports.delivery import Deliverer
from bot.ports.intake import Channel
from bot.ports.memory import Departures
from bot.ports.model import ModelRuntime
from bot.ports.tools import ToolSpec
from bot.prompt import AgentTexts, Assembler, TokenCounter
from bot.prompt.assembler import FLOOR_SHARE
from bot.stores import OpenStore, RunRecords
from bot.tools import MakeTool, Toolbox
from bot.voice.local import build_transcriber

if TYPE_CHECKING:
    from bot.mcp.hub import McpHub
    from bot.ports.tools import Tool
    from bot.recall import RecallCache
    from bot.turns import TurnRequest
    from channels.cron.chat import ScheduleDesk
    from channels.cron.plan import JobPlan
    from channels.cron.runner import CronRunner
    from channels.cron.scheduler import CronScheduler
    from channels.cron.webhook import WebhookEndpoint

log = structlog.get_logger(__name__)

APPROVAL_SWEEP_SECONDS = 30.0  # how often pending approvals are checked for expiry


def require_api_key(config: Config) -> str:
    key = config.secrets.get("ANTHROPIC_API_KEY")
    if not key:
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set. Fix: export ANTHROPIC_API_KEY=... or put it in a .env "
            "file next to where you run `bot` (it is read from the environment only)."
        )
    problem = config.secrets.problem("ANTHROPIC_API_KEY")
    if problem is not None:
        raise ConfigError(problem)
    return key


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


def build_hub(config: Config) -> McpHub:
    """The configured MCP servers (not started), with the secrets their env and headers name."""
    from bot.mcp.hub import McpHub

    return McpHub(config.settings.mcp, config.secrets.values)


def build_assembler(
    config: Config,
    agent: AgentTexts,
    counter: TokenCounter,
    policy: Policy | None = None,
    toolbox: Toolbox | None = None,
) -> Assembler:
    """The assembler, or a ConfigError when the model's window cannot fund the prompt's floors
    (the same check for `bot run`, `bot chat`, `bot preview` and `bot doctor`)."""
    settings = config.settings
    policy = policy or load_policy(settings, agent)
    toolbox = toolbox or build_toolbox(config, agent)
    try:
        assembler = Assembler(
            agent,
            model=settings.model.name,
            max_tokens=settings.model.max_tokens,
            context_window=settings.model.window,
            timezone=settings.agent.timezone,
            counter=counter,
            tools=toolbox.specs,
            memory_enabled=settings.memory.enabled,
            skill_max_bytes=settings.agent.skill_max_bytes,
            session_template=policy.session_template,
            turn_template=policy.turn_template,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if assembler.fixed_tokens > FLOOR_SHARE * assembler.input_budget:
        raise ConfigError(
            f"model.context_window ({settings.model.window}) leaves {assembler.input_budget} "
            f"tokens for input after model.max_tokens ({settings.model.max_tokens}), but the "
            f"agent-wide part (guardrails, identity, skills, tool definitions) alone takes about "
            f"{assembler.fixed_tokens}, leaving no room for the conversation. Fix: raise "
            "model.context_window, lower model.max_tokens, or shorten the identity and "
            "agent.selected_skills."
        )
    return assembler


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
    return SlackChannel(settings, secrets, parts.http, departures=parts.departures, tls=parts.tls)


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
    )


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
        if self._runner is None:
            return None
        for site in self._runner.sites:
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                return int(server.sockets[0].getsockname()[1])
        return None

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

    async def _start(self) -> None:
        settings = self.config.settings
        self._start_tracing()
        agent = load_agent(settings.agent)
        policy = load_policy(settings, agent)
        # One counter: the runtime refines its calibration from the API's usage, and the
        # assembler's budget estimates follow.
        counter = TokenCounter(calibration=settings.model.token_calibration)
        # One TLS client context (the system's CAs; SSL_CERT_FILE / SSL_CERT_DIR honoured) for
        # the model API, Slack and Telegram: building one reads the whole CA bundle.
        tls = ssl.create_default_context()
        model = self._model_override or self._build_model(counter, tls)
        self._exits.push_async_callback(model.aclose)
        if self._runs.check_model:
            await self._verify_model(model)
        store = await open_configured(
            settings.store,
            settings.memory,
            attachments=settings.attachments,
        )
        self._store = store
        self._exits.push_async_callback(store.aclose)
        self.approvals = ApprovalDesk(
            store.approvals, settings.approvals, **({"clock": self._clock} if self._clock else {})
        )
        # Channels add their routes whenever the port is configured, so a command that does not
        # serve it (`bot cron run`) accepts the same config as `bot run`.
        http = self.web if settings.http.enabled else None
        departures = MemoryDepartures(store.memory if settings.memory.enabled else None)
        parts = Parts(self.config, store, http, departures, tls)
        self.channels = [build(parts) for build in self._builders]
        deliverers = {channel.name: channel.deliverer for channel in self.channels}
        hub = await self._start_mcp()
        desk = await self._schedule_desk(store)
        toolbox = build_toolbox(self.config, agent, store.attachments, hub, desk)
        assembler = build_assembler(self.config, agent, counter, policy, toolbox)
        self._host = self._build_host(policy, assembler, toolbox, model, store, deliverers)
        self.web.router.add_get("/healthz", self._healthz)
        self.web.router.add_get("/metrics", self._metrics)
        await self._prepare_cron(store, deliverers)
        if http is not None and self._runs.http:
            await self._start_http()
        stop_approvals = self._connect_approvals(self._host, hub)
        await self._start_channels(self._host)
        # Leaving: continuations under way enter the lanes before the host closes them.
        self._exits.push_async_callback(stop_approvals)
        await self._start_cron()

    def _start_tracing(self) -> None:
        """One trace per turn, exported over OTLP/HTTP, when `[otel] endpoint` is set."""
        otel = self.config.settings.otel
        if otel.endpoint is None:
            return
        if not tracing.available():
            raise ConfigError(
                f"otel.endpoint = {otel.endpoint!r}, but the OpenTelemetry packages are not "
                "installed. Fix: pip install -e '.[otel]' (the otel extra), or remove "
                "otel.endpoint."
            )
        tracing.install(otel.endpoint, service=otel.service_name, content=otel.content)
        # Last out: export what is batched, off the event loop (the exporter's HTTP call blocks).
        self._exits.push_async_callback(asyncio.to_thread, tracing.shutdown)
        log.info("traces_exporting", endpoint=otel.endpoint, content=otel.content)

    async def _schedule_desk(self, store: OpenStore) -> ScheduleDesk | None:
        """Schedules from chat, when `[schedules] allowed` names anyone: their records (shared
        with cron's) and the desk the `schedule` tool works at."""
        settings = self.config.settings
        if not settings.schedules.enabled:
            return None
        from channels.cron.chat import ScheduleDesk

        records = await self._run_records(store)
        return ScheduleDesk(
            records,
            settings.schedules,
            settings.schedules.timezone or settings.agent.timezone,
            operators=frozenset(settings.budget.operators),
            changed=self._schedules_changed,
        )

    def _schedules_changed(self) -> None:
        if self.cron is not None:
            self.cron.changed()

    async def _run_records(self, store: OpenStore) -> RunRecords:
        """The store's cron records (runs, slots, pauses, chat schedules), opened once."""
        if self._records is None:
            self._records = await store.cron_runs()
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
        assembler: Assembler,
        toolbox: Toolbox,
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
        host = Host(
            thinking=Thinking(
                assembler,
                model,
                self.approvals.gate(toolbox.for_turn)
                if self.approvals is not None
                else toolbox.for_turn,
            ),
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

    def _attachment_intake(self, store: OpenStore) -> AttachmentIntake | None:
        attachment_store: AttachmentStore | None = store.attachments
        if attachment_store is None:
            return None
        sources = {c.name: c.files for c in self.channels if c.files is not None}
        transcriber = build_transcriber(self.config.settings.voice)
        return AttachmentIntake(
            attachment_store, self.config.settings.attachments, sources, transcriber
        )

    def _connect_approvals(self, host: Host, hub: McpHub | None) -> Callable[[], Awaitable[None]]:
        """Approvals: the channels that show cards and take presses, the lane continuations
        enter, the MCP tools an approved call runs, and the sweep that expires requests."""
        desk = self.approvals
        assert desk is not None
        cards = {c.name: c for c in self.channels if isinstance(c, ApprovalCards)}
        for channel in cards.values():
            channel.use_approvals(desk)
        desk.connect(host, cards, hub.tools if hub is not None else tuple)
        sweep = asyncio.create_task(self._expire_approvals(desk))

        async def stop_sweep() -> None:
            sweep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweep
            await desk.idle()

        return stop_sweep

    async def _expire_approvals(self, desk: ApprovalDesk) -> None:
        while True:
            await asyncio.sleep(APPROVAL_SWEEP_SECONDS)
            try:
                await desk.expire_due()
                await desk.recover()
            except Exception as exc:  # the store is down for now: the next sweep tries again
                log.warning("approval_sweep_failed", error=type(exc).__name__)

    async def _start_channels(self, host: Host) -> None:
        for channel in self.channels:
            await channel.start(host, intake=self._runs.intake)
            self._exits.push_async_callback(channel.stop)
            log.info("channel_started", channel=channel.name)
        # Leaving runs these in reverse: the host stops intake (channels then answer 503, stop
        # acknowledging and stop polling), finishes (or cancels) running turns and posts what is
        # left in the outbox while channels can still deliver; then channels, HTTP, store close.
        self._exits.push_async_callback(host.close)
        if self._runs.resume and self._runs.intake:
            # What an earlier process left (pending turns, undelivered parts) runs now, ahead of
            # anything accepted since the channels started.
            await host.resume()

    async def _prepare_cron(self, store: OpenStore, deliverers: Mapping[str, Deliverer]) -> None:
        """Check jobs and webhooks (a ConfigError stops start-up here), open their run records and
        add the webhook route, before the HTTP server freezes its router."""
        from channels.cron.plan import plan_hooks, plan_jobs
        from channels.cron.runner import CronRunner
        from channels.cron.webhook import WebhookEndpoint

        settings = self.config.settings
        platforms = settings.platforms()
        jobs = plan_jobs(settings.cron, platforms)
        hooks = (
            plan_hooks(
                settings.webhooks, self.config.secrets, platforms, http=settings.http.enabled
            )
            if self._runs.http
            else []
        )
        chat = settings.schedules.enabled
        if not jobs and not hooks and not chat:
            return
        runs = await self._run_records(store)
        self.cron_jobs = jobs
        self.cron_runner = CronRunner(self.host, deliverers, runs)
        if hooks:
            self.webhooks = WebhookEndpoint(hooks, self.cron_runner)
            self.webhooks.install(self.web)
        if (jobs or chat) and self._runs.scheduler:
            from channels.cron.chat import job_plans
            from channels.cron.scheduler import CronScheduler

            self.cron = CronScheduler(
                jobs,
                self.cron_runner,
                runs,
                misfire_grace=settings.cron.misfire_grace,
                retries=settings.cron.retries,
                retry_delay=settings.cron.retry_delay,
                source=(lambda: job_plans(runs)) if chat else None,
            )

    async def _start_cron(self) -> None:
        """Start the scheduler after the channels; leaving stops it (and webhooks) first."""
        grace = self.config.settings.host.shutdown_grace
        if self.webhooks is not None:
            self._exits.push_async_callback(self.webhooks.stop, grace)
        if self.cron is not None:
            await self.cron.start()
            self._exits.push_async_callback(self.cron.stop, grace)

    def _build_model(self, counter: TokenCounter, tls: ssl.SSLContext) -> ModelRuntime:
        from bot.model import AnthropicRuntime

        settings, key = self.config.settings.model, require_api_key(self.config)
        return AnthropicRuntime(settings, key, counter, tls=tls)

    async def _verify_model(self, model: ModelRuntime) -> None:
        """A refused key stops start-up (nothing could be answered); a model API that is down
        right now does not (turns retry, and it may be back by the first message)."""
        from bot.errors import ModelAuthError, ModelError
        from bot.model import AnthropicRuntime

        if not isinstance(model, AnthropicRuntime):
            return
        try:
            await model.check_key()
        except ModelAuthError as exc:
            raise ConfigError(str(exc)) from None
        except ModelError as exc:
            log.warning("model_check_failed", error=str(exc))

    async def _start_http(self) -> None:
        settings = self.config.settings.http
        runner = web.AppRunner(self.web, access_log=None)
        await runner.setup()
        self._exits.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, settings.host, settings.port)
        try:
            await site.start()
        except OSError as exc:
            raise ConfigError(
                f"http.port = {settings.port}: cannot listen on {settings.host}:{settings.port} "
                f"({exc.strerror}). Fix: choose a free port in [http] port, or set "
                "http.enabled = false when no HTTP features are needed."
            ) from exc
        self._runner = runner
        log.info("http_listening", host=settings.host, port=self.http_port)

    def _channels_up(self) -> dict[str, bool]:
        return {c.name: c.connected for c in self.channels}

    async def _healthz(self, request: web.Request) -> web.Response:
        channels = self._channels_up()
        draining = self._host is not None and self._host.draining
        ok = all(channels.values()) and not draining
        body: dict[str, Any] = {"ok": ok, "channels": channels}
        if draining:
            body["draining"] = True
        return web.json_response(body, status=200 if ok else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self.metrics.render())
        response.content_type = "text/plain"
        response.headers["Content-Type"] = CONTENT_TYPE
        return response
