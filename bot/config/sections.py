"""The core's configuration sections (agent, model, store, memory, attachments, http, host,
logging, prompt, otel) with their bounds and validators, and `CoreSettings`, which composes them
(the composition root's model adds each part's own section)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.config.agents import AgentEntry, HandoffSettings, check_agents
from bot.config.providers import (
    DEFAULT_KEY_ENV,
    Capabilities,
    Endpoint,
    EnvName,
    ProviderSettings,
    Wire,
    endpoint_for,
    key_names,
)
from bot.errors import ConfigError
from bot.policy.budget import BudgetSettings
from bot.policy.surfaces import SurfaceRule, ThinkingBudget

# Context windows of the models people use; anything else falls back to the common 200k.
CONTEXT_WINDOWS = {
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
}
DEFAULT_CONTEXT_WINDOW = 200_000


def window_for(name: str) -> int:
    """The known context window of a model family, else the common 200k."""
    for prefix, size in CONTEXT_WINDOWS.items():
        if name.startswith(prefix):
            return size
    return DEFAULT_CONTEXT_WINDOW


def encoding_for(wire: str, name: str) -> str:
    """The tiktoken encoding that estimates a model's tokens (loaded offline, from files a
    package ships): cl100k_base (calibrated) for Claude, o200k_base for OpenAI's models and the
    other models an OpenAI-compatible server hosts."""
    if name.startswith("claude") or (wire == "anthropic" and not name.startswith("gpt")):
        return "cl100k_base"
    return "o200k_base"


# Upper bounds: every number a person can set has one (a huge value must fail validation with
# the key's name, not crash `bot run` later).
_MiB = 1024 * 1024
_TiB = 1024 * _MiB * 1024
_DAY = 86_400


class Section(BaseModel):
    """One `[section]` of the file. Each part declares its own; the core composes them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def check(self) -> None:
        """Checks beyond the values' shapes (files on disk, unique names), run by
        `check_files`; raises ConfigError. None by default."""


def check_timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError("not a known IANA timezone (e.g. 'Europe/Berlin', 'UTC')") from exc
    return value


class AgentSettings(Section):
    identity_path: Path
    soul_path: Path | None = None
    skills_root: Path | None = None
    selected_skills: list[str] = []
    skill_max_bytes: Annotated[int, Field(ge=256, le=1_000_000)] = 48_000
    timezone: str = "UTC"

    _tz = field_validator("timezone")(check_timezone)

    def check(self) -> None:
        if not self.identity_path.is_file():
            raise ConfigError(
                f"agent.identity_path = '{self.identity_path}': file not found. The identity "
                "file says who the agent is and is required. Fix: create it, or point "
                "agent.identity_path at it (`bot init` writes a starter one)."
            )
        if self.soul_path is not None and not self.soul_path.is_file():
            raise ConfigError(
                f"agent.soul_path = '{self.soul_path}': file not found. Fix: create it, or "
                "remove agent.soul_path to use the built-in guardrails."
            )
        if self.selected_skills:
            self._check_skills()

    def _check_skills(self) -> None:
        root = self.skills_root
        if root is None:
            raise ConfigError(
                f"agent.selected_skills = {self.selected_skills!r} but agent.skills_root is not "
                "set. Fix: set agent.skills_root to the folder holding <name>/SKILL.md."
            )
        for name in self.selected_skills:
            if not (root / name / "SKILL.md").is_file():
                raise ConfigError(
                    f"agent.selected_skills: skill {name!r} not found at "
                    f"{root / name / 'SKILL.md'}. Fix: create it or remove it from "
                    "agent.selected_skills."
                )


class ModelSettings(Section):
    name: str = "claude-sonnet-4-6"
    # The wire [model] speaks: "anthropic" (Messages API) or "openai" (Chat Completions: OpenAI,
    # OpenRouter, vLLM, Ollama, llama.cpp, LM Studio at `base_url`).
    provider: Wire = "anthropic"
    base_url: str | None = None
    # The variable holding the key (default ANTHROPIC_API_KEY / OPENAI_API_KEY; optional for an
    # OpenAI-compatible server at a base_url, e.g. a local one).
    api_key_env: EnvName | None = None
    capabilities: Capabilities = Capabilities()
    # Tried in order after the retries of an overload, a 5xx or a timeout: "PROVIDER:MODEL".
    fallbacks: Annotated[list[str], Field(max_length=8)] = []
    max_tokens: Annotated[int, Field(ge=1, le=128_000)] = 4096
    # Extended thinking (Anthropic wire): tokens the model may think in before it answers, on
    # top of max_tokens; 0 (default) sends no thinking at all. A surface rule may set its own.
    thinking_budget: ThinkingBudget = 0
    context_window: Annotated[int, Field(ge=1024, le=10_000_000)] | None = None
    max_turns: Annotated[int, Field(ge=0, le=100)] = 24
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 4
    retry_budget: Annotated[float, Field(gt=0, le=3600)] = 90.0
    token_calibration: Annotated[float, Field(gt=0.5, le=3.0)] = 1.15

    @property
    def home(self) -> Endpoint:
        """Where `name` is called (the request's own model: a surface rule may change it)."""
        local = self.provider == "openai" and self.base_url is not None
        return Endpoint(
            provider=self.provider,
            wire=self.provider,
            base_url=self.base_url,
            key_env=self.api_key_env or DEFAULT_KEY_ENV[self.provider],
            model=None,
            capabilities=self.capabilities.on(self.provider),
            key_required=self.api_key_env is not None or not local,
        )

    def endpoints(self, providers: Mapping[str, ProviderSettings]) -> list[Endpoint]:
        """The model's endpoint, then each fallback's, in order."""
        home = self.home
        fallbacks = [
            endpoint_for(ref, f"model.fallbacks[{i}]", home, providers)
            for i, ref in enumerate(self.fallbacks)
        ]
        return [home, *fallbacks]

    @property
    def encoding(self) -> str:
        """The tiktoken encoding that estimates this model family's tokens."""
        return encoding_for(self.provider, self.name)

    @property
    def calibration(self) -> float:
        """o200k_base is an OpenAI family's own vocabulary: no correction unless one is set."""
        if self.encoding == "o200k_base" and "token_calibration" not in self.model_fields_set:
            return 1.0
        return self.token_calibration

    @property
    def window(self) -> int:
        return self.context_window or window_for(self.name)


class StoreSettings(Section):
    path: Path = Path("data/bot.sqlite3")
    # A PostgreSQL server instead of the SQLite file at `path` (needed for several replicas).
    # The password comes from the environment (PGPASSWORD) or a .pgpass file, never this URL.
    url: str | None = None
    # SQLite's `synchronous` in WAL mode. "normal": a commit survives a crash of this process
    # (what exactly-once promises) but the last commits may be lost on a power cut; "full": it
    # waits for the disk on every commit, surviving a power cut too, at about a third of the
    # throughput. PostgreSQL keeps its server's own setting.
    synchronous: Literal["normal", "full"] = "normal"
    history_messages: Annotated[int, Field(ge=2, le=10_000)] = 64
    # Tool results of the newest N turns are replayed in full; older ones, from the next time
    # history is halved or compacted, as a short reference the model can fetch again (0: never).
    tool_results_turns: Annotated[int, Field(ge=0, le=10_000)] = 3
    message_max_bytes: Annotated[int, Field(ge=1024, le=64 * _MiB)] = 64 * 1024
    max_bytes: Annotated[int, Field(ge=_MiB, le=_TiB)] = 256 * 1024 * 1024
    max_conversations: Annotated[int, Field(ge=1, le=100_000_000)] = 10_000
    idle_days: Annotated[int, Field(ge=1, le=36_500)] = 365
    turn_records_keep: Annotated[int, Field(ge=0, le=100_000_000)] = 10_000
    # Requests can be large (a full history): the records are bounded in bytes too.
    turn_records_max_bytes: Annotated[int, Field(ge=_MiB, le=_TiB)] = 256 * 1024 * 1024

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else check_store_url(value.strip())


def check_store_url(url: str) -> str:
    """A `postgresql://` URL without a password in it (secrets never live in the config)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(
            "must be a postgresql://user@host:port/database URL (for SQLite set store.path and "
            "leave store.url unset)"
        )
    if parts.password is not None or "password=" in parts.query:
        raise ValueError(
            "must not contain the password: put it in the environment as PGPASSWORD (or in a "
            ".pgpass file) and remove it from the URL"
        )
    return url


class MemorySettings(Section):
    enabled: bool = True
    recall_hits: Annotated[int, Field(ge=0, le=50)] = 5
    recall_max_bytes: Annotated[int, Field(ge=256, le=1_000_000)] = 8 * 1024
    # Memories kept in all; past it the oldest go first (checked every RETENTION_EVERY captures).
    max_entries: Annotated[int, Field(ge=100, le=1_000_000_000)] = 1_000_000
    # Console and request-driven turns recall only their own conversation's memories unless
    # this widens them to everything (a single-operator deployment may want that).
    wide_console_recall: bool = False
    # In a DM, what others said in a shared surface is recallable only this many hours either
    # side of the person's own messages there (and not after the platform says they left).
    participation_window_hours: Annotated[float, Field(gt=0, le=8760)] = 168


class AttachmentSettings(Section):
    enabled: bool = True
    # Files larger than this are not downloaded (checked against the declared size first, then
    # counted while downloading).
    max_bytes: Annotated[int, Field(ge=1024, le=100 * 1024 * 1024)] = 20 * 1024 * 1024
    max_per_message: Annotated[int, Field(ge=1, le=20)] = 10
    # The attachment store (content-addressed, shared by conversations): total bytes and the
    # days an attachment is kept after it was last replayed.
    store_max_bytes: Annotated[int, Field(ge=1024 * 1024, le=1024**4)] = 512 * 1024 * 1024
    store_idle_days: Annotated[int, Field(ge=1, le=3650)] = 30


class HttpSettings(Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080


class HostSettings(Section):
    queue_per_conversation: Annotated[int, Field(ge=1, le=1000)] = 8
    turns_per_person_per_minute: Annotated[int, Field(ge=0, le=10_000)] = 12  # 0 = no limit
    shutdown_grace: Annotated[float, Field(ge=0, le=3600)] = 30.0
    max_concurrent_turns: Annotated[int, Field(ge=1, le=1000)] = 16


class LoggingSettings(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


class PromptSettings(Section):
    # Template files with named slots (see README: prompt templates); the built-in ones without.
    session_template: Path | None = None
    turn_template: Path | None = None


class OtelSettings(Section):
    """`[otel]`: OpenTelemetry traces, one per turn (needs the `otel` extra)."""

    endpoint: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    service_name: Annotated[str, Field(min_length=1, max_length=100)] = "bot"
    content: bool = False  # message text on spans (bounded); off: sizes and counts only


ProviderName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]


class CoreSettings(Section):
    """The sections the core reads. The composition root's model adds each part's own section
    (a channel's settings live with the channel) and the part's secret names to `SECRETS`."""

    # Environment variables that hold credentials, in the order error messages list them.
    SECRETS: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    # The order messages list the sections in (the file's); unnamed ones follow in field order.
    ORDER: ClassVar[tuple[str, ...]] = ()

    agent: AgentSettings
    model: ModelSettings = ModelSettings()
    providers: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")], ProviderSettings
    ] = {}
    store: StoreSettings = StoreSettings()
    memory: MemorySettings = MemorySettings()
    http: HttpSettings = HttpSettings()
    attachments: AttachmentSettings = AttachmentSettings()
    host: HostSettings = HostSettings()
    logging: LoggingSettings = LoggingSettings()
    prompt: PromptSettings = PromptSettings()
    surfaces: list[SurfaceRule] = []
    budget: BudgetSettings = BudgetSettings()
    otel: OtelSettings = OtelSettings()
    agents: list[AgentEntry] = []  # several agents (SPEC §15); none: `[agent]` alone
    handoffs: HandoffSettings = HandoffSettings()

    @model_validator(mode="before")
    @classmethod
    def _default_agent(cls, raw: object) -> object:
        """Beside `[[agents]]`, `[agent]` holds defaults: its identity may be left to the first
        entry's (the default agent's)."""
        if not isinstance(raw, dict) or not isinstance(raw.get("agents"), list):
            return raw
        first = raw["agents"][0] if raw["agents"] else None
        table = raw.get("agent", {})
        if isinstance(first, dict) and isinstance(table, dict) and "identity_path" in first:
            raw = {**raw, "agent": {"identity_path": first["identity_path"], **table}}
        return raw

    @model_validator(mode="after")
    def _agents_known(self) -> CoreSettings:
        check_agents(self.agents, self.surfaces)
        return self

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables this configuration reads credentials from."""
        return tuple(dict.fromkeys((*self.SECRETS, *key_names(self.model_endpoints()))))

    def model_endpoints(self) -> list[Endpoint]:
        """Every endpoint the configuration calls, each once: the model's, its fallbacks', and
        each surface rule's model and fallbacks; raises ConfigError for a reference that names
        no provider."""
        from bot.config.models import endpoint_of, model_chain  # it resolves over these sections

        home, *fallbacks = self.model.endpoints(self.providers)
        found = {(e.provider, e.base_url, e.key_env, e.model): e for e in fallbacks}
        for index, rule in enumerate(self.surfaces):
            if rule.model is not None:
                where = f"surfaces[{index}].model"
                for ref in model_chain(rule.model, self.model, self.providers, where):
                    place = (ref.provider, ref.base_url, ref.key_env, ref.name)
                    found.setdefault(place, endpoint_of(ref))
        found.pop((home.provider, home.base_url, home.key_env, self.model.name), None)
        return [home, *found.values()]


def check_files(settings: CoreSettings) -> None:
    """Each section's checks that need more than its values (files on disk, unique names), in
    the order the sections are declared; raises ConfigError on the first problem."""
    settings.model_endpoints()
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, Section):
            value.check()
    for index, entry in enumerate(settings.agents):
        try:
            entry.settings(settings.agent).check()
        except ConfigError as exc:
            raise ConfigError(f"agents[{index}] ({entry.name}): {exc}") from None
