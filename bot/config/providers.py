"""Model providers (SPEC §8): what each wire can take (`capabilities`), the `[providers.NAME]`
tables, and the endpoints a configuration's model and its fallbacks resolve to.

A model elsewhere is written `NAME:model`, where NAME is a `[providers.NAME]` table or one of the
built-in `anthropic` and `openai` (their public APIs, keys in ANTHROPIC_API_KEY / OPENAI_API_KEY);
a bare name is on `[model]`'s own provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import ConfigError
from bot.policy.models import Capabilities as Capabilities
from bot.policy.models import Wire as Wire

WIRES: tuple[Wire, ...] = ("anthropic", "openai")
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
DEFAULT_KEY_ENV: Mapping[Wire, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
}


class ProviderSettings(BaseModel):
    """`[providers.NAME]`: another provider a model may be on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wire: Wire
    base_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    api_key_env: EnvName | None = None  # optional for a local server
    capabilities: Capabilities = Capabilities()


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one model is called: its provider's name, wire, base URL and key variable (None:
    no key), the model (None: the request's own) and what it accepts."""

    provider: str
    wire: Wire
    base_url: str | None
    key_env: str | None
    model: str | None
    capabilities: Capabilities
    key_required: bool = True

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider


def endpoint_for(
    ref: str,
    where: str,
    home: Endpoint,
    providers: Mapping[str, ProviderSettings],
) -> Endpoint:
    """The endpoint of a model reference (`NAME:model`, or a bare name on `home`'s provider)."""
    # Provider names have no colon; model names may (Ollama's `qwen3:32b`).
    name, _, model = ref.partition(":") if ":" in ref else ("", "", ref)
    if not model.strip():
        raise ConfigError(
            f"{where} = {ref!r} names no model. Fix: write it as PROVIDER:MODEL, e.g. "
            '"openai:gpt-5-mini".'
        )
    if not name:
        return replace(home, model=model)
    table = providers.get(name)
    if table is not None:
        return Endpoint(
            provider=name,
            wire=table.wire,
            base_url=table.base_url,
            key_env=table.api_key_env,
            model=model,
            capabilities=table.capabilities.on(table.wire),
            key_required=table.api_key_env is not None,
        )
    if name in WIRES:
        wire: Wire = "openai" if name == "openai" else "anthropic"
        return Endpoint(name, wire, None, DEFAULT_KEY_ENV[wire], model, Capabilities().on(wire))
    known = ", ".join(sorted({*providers, *WIRES}))
    raise ConfigError(
        f"{where} = {ref!r}: there is no provider {name!r} (known: {known}). Fix: add a "
        f'[providers.{name}] table with wire = "openai" or "anthropic", base_url and '
        "api_key_env, or start the name with a known provider (a model name with a colon needs "
        'its provider in front: "local:qwen3:32b").'
    )


def key_names(endpoints: Sequence[Endpoint]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e.key_env for e in endpoints if e.key_env))
