"""Validation against the settings model, each failure explained as one line: where the bad value
came from (the file or an environment variable), the key, the value and the fix."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from bot.config.env import is_model
from bot.config.sections import CoreSettings
from bot.errors import ConfigError

S = TypeVar("S", bound=CoreSettings)


def validate(
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
        field = model.model_fields.get(part) if is_model(model) else None
        if field is None:
            return []
        annotation = field.annotation
        if typing.get_origin(annotation) is list:
            annotation = typing.get_args(annotation)[0]
        model = annotation
    return sorted(model.model_fields) if is_model(model) else []


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
