"""Configuration: the core's sections, and loading (defaults < TOML file < environment) and
validation against the composition root's model, which adds each part's own section.

Secrets never come from the file: they are read from the environment (and a `.env` file) into
`Secrets`. Every validation failure becomes one `ConfigError` naming the key, the value and the fix.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.budget import BudgetSettings
from bot.errors import ConfigError
from bot.surfaces import SurfaceRule

DEFAULT_CONFIG = Path("config/bot.toml")
ENV_PREFIX = "BOT_"

# Context windows of the models people use; anything else falls back to the common 200k.
CONTEXT_WINDOWS = {"claude-opus-4": 200_000, "claude-sonnet-4": 200_000, "claude-haiku-4": 200_000}
DEFAULT_CONTEXT_WINDOW = 200_000


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
    base_url: str | None = None
    max_tokens: Annotated[int, Field(ge=1, le=128_000)] = 4096
    context_window: Annotated[int, Field(ge=1024, le=10_000_000)] | None = None
    max_turns: Annotated[int, Field(ge=0, le=100)] = 24
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 4
    retry_budget: Annotated[float, Field(gt=0, le=3600)] = 90.0
    token_calibration: Annotated[float, Field(gt=0.5, le=3.0)] = 1.15

    @property
    def window(self) -> int:
        if self.context_window is not None:
            return self.context_window
        for prefix, size in CONTEXT_WINDOWS.items():
            if self.name.startswith(prefix):
                return size
        return DEFAULT_CONTEXT_WINDOW


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


class CoreSettings(Section):
    """The sections the core reads. The composition root's model adds each part's own section
    (a channel's settings live with the channel) and the part's secret names to `SECRETS`."""

    # Environment variables that hold credentials, in the order error messages list them.
    SECRETS: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    # The order messages list the sections in (the file's); unnamed ones follow in field order.
    ORDER: ClassVar[tuple[str, ...]] = ()

    agent: AgentSettings
    model: ModelSettings = ModelSettings()
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

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables this configuration reads credentials from."""
        return self.SECRETS


@dataclass(frozen=True)
class Secrets:
    """Credentials, from the environment only. `repr` never shows a value."""

    values: Mapping[str, str]

    def get(self, name: str) -> str | None:
        return self.values.get(name) or None

    def problem(self, name: str) -> str | None:
        """What is wrong with the shape of secret `name` (stray whitespace, characters no HTTP
        header can carry), as an operator message with the fix; None when it looks usable."""
        value = self.values.get(name) or ""
        if value != value.strip():
            return (
                f"{name} has stray whitespace around it (a trailing newline or space from "
                f"copying it). Fix: set {name} to the value alone, e.g. in .env without quotes "
                "or spaces."
            )
        if not (value.isascii() and value.isprintable() and " " not in value):
            return (
                f"{name} holds characters no credential has (spaces, line breaks or non-ASCII "
                f"letters). Fix: copy the {name} value again from where it was issued."
            )
        return None

    def __repr__(self) -> str:
        return f"Secrets(set={sorted(k for k, v in self.values.items() if v)})"

    @classmethod
    def from_env(cls, env: Mapping[str, str], names: tuple[str, ...]) -> Secrets:
        return cls({name: env[name] for name in names if env.get(name)})


S = TypeVar("S", bound=CoreSettings)


@dataclass(frozen=True)
class Config(Generic[S]):
    settings: S
    secrets: Secrets
    source: Path | None  # the TOML file, when one was read
    warnings: tuple[str, ...] = ()  # things that are not errors but likely mistakes (stray BOT_)


def load_config(
    model: type[S],
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    verify_files: bool = True,
) -> Config[S]:
    """Read the TOML file (or the default one when present), apply env overrides, and validate
    against `model` (the composition root's, which names every part's section)."""
    explicit = path is not None
    path = path or DEFAULT_CONFIG
    if env is None:
        _read_dotenv(path)
        env = os.environ
    raw: dict[str, Any] = {}
    source: Path | None = None
    if path.exists():
        raw = _read_toml(path)
        source = path
    elif explicit:
        raise ConfigError(
            f"config file {path} not found. Fix: pass the right --config PATH, "
            f"or run `bot init {path.parent}` to write a starter config there."
        )
    from_env = _apply_env(model, raw, env)
    if source is None and "agent" not in raw:
        raise ConfigError(
            f"no config file at {path} (looked from {Path.cwd()}). Fix: run `bot init` to write "
            "a starter config folder there, or pass --config PATH to an existing bot.toml."
        )
    if env.get("ANTHROPIC_BASE_URL") and ("model", "base_url") not in from_env:
        # The SDK's own variable overrides the file like any other (env > file), but not
        # BOT_MODEL__BASE_URL, which names the setting itself.
        raw.setdefault("model", {})["base_url"] = env["ANTHROPIC_BASE_URL"]
    _resolve_paths(raw, path.parent if source else Path.cwd())
    settings = _validate(model, raw, source, from_env)
    if verify_files:
        check_files(settings)
    warnings = tuple(_stray_env_warnings(model, env))
    return Config(settings, Secrets.from_env(env, settings.secret_names()), source, warnings)


def _read_dotenv(config_path: Path) -> None:
    from dotenv import load_dotenv

    for candidate in (Path(".env"), config_path.parent / ".env"):
        if candidate.is_file():
            try:
                load_dotenv(candidate, override=False)
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{candidate}: not UTF-8 text (byte {exc.start}). Fix: save it as UTF-8."
                ) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}). Fix the syntax at that line.") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}). Fix: save it as UTF-8, as TOML requires."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror}). Fix: pass --config the path of a readable "
            "bot.toml file."
        ) from exc


# Environment overrides: BOT_<SECTION>__<KEY>=value, e.g. BOT_MODEL__NAME=claude-opus-4-1.
_ENV_KEY = re.compile(rf"^{ENV_PREFIX}([A-Z]+)__([A-Z0-9_]+)$")


def _apply_env(
    model: type[CoreSettings], raw: dict[str, Any], env: Mapping[str, str]
) -> dict[tuple[str, str], str]:
    """Apply the BOT_ overrides to `raw`; returns which variable set each (section, key)."""
    applied: dict[tuple[str, str], str] = {}
    for name, value in env.items():
        match = _ENV_KEY.match(name)
        if not match:
            continue
        section, key = match.group(1).lower(), match.group(2).lower()
        field = model.model_fields.get(section)
        if field is None or not _is_model(field.annotation):
            raise ConfigError(
                f"environment variable {name}: there is no [{section}] section. "
                f"Fix: use one of {', '.join(_sections(model))} or unset it."
            )
        raw.setdefault(section, {})[key] = _env_value(value, _field_type(model, section, key))
        applied[(section, key)] = name
    return applied


def _stray_env_warnings(model: type[CoreSettings], env: Mapping[str, str]) -> list[str]:
    """BOT_ variables that set nothing (BOT_MODEL_NAME for BOT_MODEL__NAME): likely typos."""
    found = []
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and not _ENV_KEY.match(name):
            guess = _env_guess(model, name)
            found.append(
                f"environment variable {name} sets nothing: settings are "
                f"{ENV_PREFIX}<SECTION>__<KEY> (two underscores)"
                + (f"; did you mean {guess}?" if guess else ".")
            )
    return found


def _env_guess(model: type[CoreSettings], name: str) -> str | None:
    rest = name.removeprefix(ENV_PREFIX).lower()
    for section in _sections(model):
        if rest.startswith(section + "_"):
            key = rest.removeprefix(section + "_").lstrip("_")
            return f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
    return None


def _sections(model: type[CoreSettings]) -> list[str]:
    names = [n for n, f in model.model_fields.items() if _is_model(f.annotation)]
    rank = {name: index for index, name in enumerate(model.ORDER)}
    return sorted(names, key=lambda name: rank.get(name, len(rank)))


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _field_type(model: type[CoreSettings], section: str, key: str) -> Any:
    part = model.model_fields[section].annotation
    if not _is_model(part):
        return None
    assert isinstance(part, type)
    field = part.model_fields.get(key)
    return field.annotation if field else None


def _env_value(value: str, annotation: Any) -> Any:
    """Lists accept JSON or comma-separated text; everything else is left to validation."""
    if typing.get_origin(annotation) is list:
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                return json.loads(stripped)
            except json.JSONDecodeError:
                return value
        return [item.strip() for item in stripped.split(",") if item.strip()]
    return value


_PATH_KEYS = {("agent", "identity_path"), ("agent", "soul_path"), ("agent", "skills_root")}
_PATH_KEYS |= {("store", "path"), ("prompt", "session_template"), ("prompt", "turn_template")}


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for section, key in _PATH_KEYS:
        value = raw.get(section, {}).get(key)
        if isinstance(value, str) and value:
            candidate = Path(value).expanduser()
            raw[section][key] = candidate if candidate.is_absolute() else base / candidate
    for rule in raw.get("surfaces", []) if isinstance(raw.get("surfaces"), list) else []:
        value = rule.get("instructions_path") if isinstance(rule, dict) else None
        if isinstance(value, str) and value:
            rule["instructions_path"] = Path(value).expanduser()
            if not rule["instructions_path"].is_absolute():
                rule["instructions_path"] = base / rule["instructions_path"]


def _validate(
    model: type[S],
    raw: dict[str, Any],
    source: Path | None,
    from_env: Mapping[tuple[str, str], str],
) -> S:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = [_where(error, source, from_env) + _explain(model, error) for error in exc.errors()]
        raise ConfigError("\n".join(lines)) from None


def _where(
    error: Mapping[str, Any], source: Path | None, from_env: Mapping[tuple[str, str], str]
) -> str:
    """Who set the bad value: the environment variable when one did, else the file."""
    loc = tuple(str(part) for part in error["loc"][:2])
    if len(loc) == 2 and loc in from_env:
        return f"environment variable {from_env[(loc[0], loc[1])]}: "
    return f"{source}: " if source else ""


def _explain(model: type[CoreSettings], error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error["loc"]]
    key = _dotted(loc)
    kind = error["type"]
    value = error.get("input")
    # A URL refused for holding a password must not print it back.
    shown = "(not shown)" if loc == ["store", "url"] else _shown(value)
    if kind == "extra_forbidden":
        if loc[-1].lower() in _secret_keys(model):
            return (
                f"{key}: secrets are never read from the config file. Fix: remove it and set "
                f"the environment variable instead ({', '.join(model.SECRETS)}), e.g. in .env."
            )
        known = _known_keys(model, loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1)
        return (
            f"{key}: unknown key"
            + (f" (did you mean {close[0]}?)" if close else "")
            + ". Fix: remove it or correct the spelling"
            + (f" (known keys here: {', '.join(known)})" if known else "")
            + "."
        )
    if kind == "missing":
        return f"{key}: required but not set. Fix: add `{loc[-1]} = ...` under its section."
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if "Fix:" in message:  # the validator already said how to fix it
        return f"{key} = {shown}: {message.rstrip('.')}."
    return f"{key} = {shown}: {message}. Fix: {_fix_for(kind, error, loc)}."


def _secret_keys(model: type[CoreSettings]) -> set[str]:
    return {name.lower() for name in model.SECRETS} | _SECRET_KEYS


# Keys that can only be an attempt to put a credential in the file (`bot_token`, `api_key`...).
_SECRET_KEYS = {
    "token",
    "secret",
    "password",
    "api_key",
    "bot_token",
    "app_token",
    "signing_secret",
    "webhook_secret",
}


def _dotted(loc: list[str]) -> str:
    parts: list[str] = []
    for part in loc:
        if part.isdigit() and parts:
            parts[-1] += f"[{part}]"
        else:
            parts.append(part)
    return ".".join(parts)


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, Path) else repr(str(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _known_keys(root: type[CoreSettings], loc: list[str]) -> list[str]:
    model: Any = root
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part) if _is_model(model) else None
        if field is None:
            return []
        annotation = field.annotation
        if typing.get_origin(annotation) is list:
            annotation = typing.get_args(annotation)[0]
        model = annotation
    return sorted(model.model_fields) if _is_model(model) else []


def _fix_for(kind: str, error: Mapping[str, Any], loc: list[str]) -> str:
    ctx = error.get("ctx") or {}
    key = ".".join(p for p in loc if not p.isdigit())
    if kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        bounds = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in ctx.items())
        return f"set {key} to a number ({bounds})"
    if kind == "literal_error":
        return f"set {key} to one of {ctx.get('expected', 'the documented values')}"
    if kind == "string_pattern_mismatch":
        return f"set {key} to a value matching {ctx.get('pattern')}"
    if kind.startswith(("int", "float", "bool", "string", "list", "model")):
        return f"give {key} a value of the right type ({_type_name(kind)})"
    return f"correct {key}"


def _type_name(kind: str) -> str:
    for prefix, name in (
        ("int", "a whole number"),
        ("float", "a number"),
        ("bool", "true or false"),
        ("string", "a quoted string"),
        ("list", 'a list, e.g. ["a", "b"]'),
        ("model", "a table"),
    ):
        if kind.startswith(prefix):
            return name
    return kind


def check_files(settings: CoreSettings) -> None:
    """Each section's checks that need more than its values (files on disk, unique names), in
    the order the sections are declared; raises ConfigError on the first problem."""
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, Section):
            value.check()
