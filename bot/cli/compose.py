"""The composition root: settings -> store -> model -> host -> HTTP port -> channels.

The one place that imports everything. `App` is an async context manager: entering starts the
store, the host, the HTTP server and every enabled channel; leaving stops intake first, lets running
turns finish up to the shutdown grace, then closes the model client, the HTTP server and the store.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from bot.agentfiles import load_agent
from bot.attachments.intake import AttachmentIntake
from bot.budget import Budgets
from bot.cli.stored import open_configured
from bot.config import Config
from bot.departures import MemoryDepartures
from bot.errors import ConfigError
from bot.host import Host
from bot.httpguard import guard
from bot.inbox import RequestCompleter
from bot.logs import remember_secrets
from bot.metrics import CONTENT_TYPE, Metrics
from bot.policyfiles import Policy, load_policy
from bot.ports import AttachmentStore, Channel, ModelRuntime
from bot.prompt import AgentTexts, Assembler, TokenCounter
from bot.prompt.assembler import FLOOR_SHARE
from bot.stores import OpenStore
from bot.tools import Toolbox

if TYPE_CHECKING:
    from channels.cron import CronRunner, CronScheduler, JobPlan, WebhookEndpoint

log = structlog.get_logger(__name__)


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
    config: Config, agent: AgentTexts, files: AttachmentStore | None = None
) -> Toolbox:
    """The tools the configuration offers; `files` where shared files are kept (the host's)."""
    settings = config.settings
    return Toolbox(
        agent,
        skill_max_bytes=settings.agent.skill_max_bytes,
        memory=settings.memory.enabled,
        attachments=settings.attachments.enabled,
        files=files if settings.attachments.enabled else None,
    )


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


class App:
    """Everything `bot run` (or `bot chat`) runs, started and stopped in the right order."""

    def __init__(
        self,
        config: Config,
        *,
        model: ModelRuntime | None = None,
        channels: bool = True,
        http: bool = True,
        cron: bool | None = None,
        intake: bool = True,
        check_model: bool = False,
    ) -> None:
        self.config = config
        remember_secrets(config.secrets.values.values())  # turn records and logs redact them
        self._model_override = model
        self._want_channels = channels
        self._want_http = http
        self._intake = intake
        self._check_model = check_model
        # The scheduler runs where the channels run (`bot run`), not in `bot chat`; `bot cron run`
        # turns it off to run one job by hand.
        self._want_cron = channels if cron is None else cron
        self.cron: CronScheduler | None = None
        self.cron_runner: CronRunner | None = None
        self.cron_jobs: list[JobPlan] = []
        self.webhooks: WebhookEndpoint | None = None
        self.channels: list[Channel] = []
        self.web = web.Application(middlewares=[guard])
        self._runner: web.AppRunner | None = None
        self._store: OpenStore | None = None
        self._host: Host | None = None
        self._model: ModelRuntime | None = None
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
        agent = load_agent(settings.agent)
        policy = load_policy(settings, agent)
        # One counter: the runtime refines its calibration from the API's usage, and the
        # assembler's budget estimates follow.
        counter = TokenCounter(calibration=settings.model.token_calibration)
        model = self._model_override or self._build_model(counter)
        self._model = model
        self._exits.push_async_callback(model.aclose)
        if self._check_model:
            await self._verify_model(model)
        store = await open_configured(
            settings.store,
            settings.memory,
            buffer_size=settings.telegram.group_buffer,
            attachments=settings.attachments,
        )
        self._store = store
        self._exits.push_async_callback(store.aclose)
        memory = store.memory if settings.memory.enabled else None

        attachment_store: AttachmentStore | None = store.attachments
        toolbox = build_toolbox(self.config, agent, attachment_store)

        intake = (
            AttachmentIntake(attachment_store, settings.attachments)
            if attachment_store is not None
            else None
        )

        budgets = Budgets(
            settings.budget,
            store.usage,
            timezone=settings.agent.timezone,
            default_model=settings.model.name,
        )
        self._host = Host(
            assembler=build_assembler(self.config, agent, counter, policy, toolbox),
            model=model,
            history=store.history,
            inbox=store.inbox,
            outbox=store.outbox,
            share=store.share,
            memory=memory,
            tools_for=toolbox.for_turn,
            settings=settings.host,
            attachments=intake,
            policies=policy.policies,
            budgets=budgets,
        )
        if self._want_channels:
            self.channels = self._build_channels(store)
        for channel in self.channels:
            completer = channel if isinstance(channel, RequestCompleter) else None
            self._host.attach(channel.name, channel.deliverer, completer)
            source = getattr(channel, "files", None)
            if source is not None and intake is not None:
                intake.add_source(channel.name, source)
        self.metrics = Metrics(
            lambda: self.host.queue_depth, self._channels_up, cost=budgets.cost_of
        )
        self._host.observers.append(self.metrics.observe)
        self.web.router.add_get("/healthz", self._healthz)
        self.web.router.add_get("/metrics", self._metrics)
        await self._prepare_cron(store)
        if self._want_http and settings.http.enabled:
            await self._start_http()
        for channel in self.channels:
            await channel.start(self._host, intake=self._intake)
            self._exits.push_async_callback(channel.stop)
            log.info("channel_started", channel=channel.name)
        # Leaving runs these in reverse: the host stops intake (channels then answer 503, stop
        # acknowledging and stop polling), finishes (or cancels) running turns and posts what is
        # left in the outbox while channels can still deliver; then channels, HTTP, store close.
        self._exits.push_async_callback(self._host.close)
        if self._want_channels and self._intake:
            # What an earlier process left (pending turns, undelivered parts) runs now, ahead of
            # anything accepted since the channels started.
            await self._host.resume()
        await self._start_cron()

    async def _prepare_cron(self, store: OpenStore) -> None:
        """Check jobs and webhooks (a ConfigError stops start-up here), open their run records and
        add the webhook route, before the HTTP server freezes its router."""
        from channels.cron import CronRunner, WebhookEndpoint, plan_hooks, plan_jobs

        settings = self.config.settings
        jobs = plan_jobs(settings)
        hooks = plan_hooks(settings, self.config.secrets) if self._want_http else []
        if not jobs and not hooks:
            return
        runs = await store.cron_runs()
        self._exits.push_async_callback(runs.aclose)
        self.cron_jobs = jobs
        self.cron_runner = CronRunner(self.host, self.host.deliverer, runs)
        if hooks:
            self.webhooks = WebhookEndpoint(hooks, self.cron_runner)
            self.webhooks.install(self.web)
        if jobs and self._want_cron:
            from channels.cron import CronScheduler

            self.cron = CronScheduler(
                jobs,
                self.cron_runner,
                runs,
                misfire_grace=settings.cron.misfire_grace,
                retries=settings.cron.retries,
                retry_delay=settings.cron.retry_delay,
            )

    async def _start_cron(self) -> None:
        """Start the scheduler after the channels; leaving stops it (and webhooks) first."""
        grace = self.config.settings.host.shutdown_grace
        if self.webhooks is not None:
            self._exits.push_async_callback(self.webhooks.stop, grace)
        if self.cron is not None:
            await self.cron.start()
            self._exits.push_async_callback(self.cron.stop, grace)

    def _build_model(self, counter: TokenCounter) -> ModelRuntime:
        from bot.model import AnthropicRuntime

        return AnthropicRuntime(self.config.settings.model, require_api_key(self.config), counter)

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

    def _build_channels(self, store: OpenStore) -> list[Channel]:
        settings, secrets = self.config.settings, self.config.secrets
        # A channel that needs the HTTP port (Slack HTTP mode, Telegram webhooks) gets None when
        # it is off, and refuses to start with a clear error instead of waiting for nothing.
        http = self.web if self._want_http and settings.http.enabled else None
        channels: list[Channel] = []
        departures = MemoryDepartures(store.memory if settings.memory.enabled else None)
        if settings.slack.enabled:
            from channels.slack import SlackChannel

            channels.append(SlackChannel(settings.slack, secrets, http, departures=departures))
        if settings.telegram.enabled:
            from channels.telegram import TelegramChannel

            channels.append(
                TelegramChannel(
                    settings.telegram,
                    secrets,
                    http,
                    buffer=store.buffer,
                    departures=departures,
                    leader=store.leadership,
                )
            )
        return channels

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
        return {c.name: bool(getattr(c, "connected", True)) for c in self.channels}

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
