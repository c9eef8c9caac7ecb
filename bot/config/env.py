"""Environment overrides of the config file: `BOT_<SECTION>__<KEY>=value` (e.g.
`BOT_MODEL__NAME=claude-opus-4-1`), and warnings for `BOT_` variables that set nothing."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from bot.config.sections import CoreSettings
from bot.errors import ConfigError

ENV_PREFIX = "BOT_"

_ENV_KEY = re.compile(rf"^{ENV_PREFIX}([A-Z]+)__([A-Z0-9_]+)$")


def apply_env(
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
        if field is None or not is_model(field.annotation):
            raise ConfigError(
                f"environment variable {name}: there is no [{section}] section. "
                f"Fix: use one of {', '.join(sections(model))} or unset it."
            )
        raw.setdefault(section, {})[key] = env_value(value, _field_type(model, section, key))
        applied[(section, key)] = name
    return applied


def stray_env_warnings(model: type[CoreSettings], env: Mapping[str, str]) -> list[str]:
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
    for section in sections(model):
        if rest.startswith(section + "_"):
            key = rest.removeprefix(section + "_").lstrip("_")
            return f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
    return None


def sections(model: type[CoreSettings]) -> list[str]:
    names = [n for n, f in model.model_fields.items() if is_model(f.annotation)]
    rank = {name: index for index, name in enumerate(model.ORDER)}
    return sorted(names, key=lambda name: rank.get(name, len(rank)))


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _field_type(model: type[CoreSettings], section: str, key: str) -> Any:
    part = model.model_fields[section].annotation
    if not is_model(part):
        return None
    assert isinstance(part, type)
    field = part.model_fields.get(key)
    return field.annotation if field else None


def env_value(value: str, annotation: Any) -> Any:
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
