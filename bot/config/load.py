"""Loading the configuration: defaults < TOML file < environment, paths resolved against the
file's folder, validated against the composition root's model, then each section's own checks."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

from bot.config.env import apply_env, stray_env_warnings
from bot.config.explain import S, validate
from bot.config.secrets import Secrets
from bot.config.sections import check_files
from bot.errors import ConfigError

DEFAULT_CONFIG = Path("config/bot.toml")


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
    from_env = apply_env(model, raw, env)
    if source is None and "agent" not in raw and "agents" not in raw:
        raise ConfigError(
            f"no config file at {path} (looked from {Path.cwd()}). Fix: run `bot init` to write "
            "a starter config folder there, or pass --config PATH to an existing bot.toml."
        )
    table = raw.get("model")
    anthropic = not isinstance(table, dict) or table.get("provider", "anthropic") == "anthropic"
    if env.get("ANTHROPIC_BASE_URL") and ("model", "base_url") not in from_env and anthropic:
        # The SDK's own variable overrides the file like any other (env > file), but not
        # BOT_MODEL__BASE_URL, which names the setting itself (nor a model on another wire).
        raw.setdefault("model", {})["base_url"] = env["ANTHROPIC_BASE_URL"]
    _resolve_paths(raw, path.parent if source else Path.cwd())
    settings = validate(model, raw, source, from_env)
    if verify_files:
        check_files(settings)
    warnings = tuple(stray_env_warnings(model, env))
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


_PATH_KEYS = {("agent", "identity_path"), ("agent", "soul_path"), ("agent", "skills_root")}
_PATH_KEYS |= {("store", "path"), ("prompt", "session_template"), ("prompt", "turn_template")}


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for section, key in _PATH_KEYS:
        value = raw.get(section, {}).get(key)
        if isinstance(value, str) and value:
            raw[section][key] = _resolved(value, base)
    for table, keys in (("surfaces", ("instructions_path",)), ("agents", _AGENT_PATHS)):
        entries = raw.get(table)
        for entry in entries if isinstance(entries, list) else []:
            for key in keys:
                value = entry.get(key) if isinstance(entry, dict) else None
                if isinstance(value, str) and value:
                    entry[key] = _resolved(value, base)


_AGENT_PATHS = ("identity_path", "soul_path", "skills_root")


def _resolved(value: str, base: Path) -> Path:
    candidate = Path(value).expanduser()
    return candidate if candidate.is_absolute() else base / candidate
