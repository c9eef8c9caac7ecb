"""Model references resolved (SPEC §8): `resolve_model` turns what a config writes for a model
(`"claude-haiku-4-5"`, `"local:qwen3-32b"`, or a `{ name = ..., fallbacks = [...] }` table) into
a `ModelRef` (provider, wire, endpoint, key variable, model name, capabilities, context window),
and `model_chain` into the model and its fallbacks in the order they are tried. `[model]`, its
fallbacks, surface rules and agents all resolve through here, so one reference means one
endpoint everywhere.

A bare name is on `[model]`'s own provider; `NAME:model` on `[providers.NAME]` or the built-in
`anthropic` / `openai` (their public APIs). Capabilities come from the table, else the provider,
else the wire's defaults; the window from the table, else `[model] context_window` for
`[model]`'s own name, else the known window of the model family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.config.providers import Capabilities, Endpoint, ProviderSettings, endpoint_for
from bot.config.sections import ModelSettings, encoding_for, window_for
from bot.policy.models import ModelChoice, ModelSpec, Wire, as_choice
from bot.ports.model import ModelRef

__all__ = ["ModelRef", "encoding_for", "model_chain", "resolve_model", "window_for"]


def resolve_model(
    spec: ModelSpec,
    model: ModelSettings,
    providers: Mapping[str, ProviderSettings],
    where: str = "model",
) -> ModelRef:
    """One model reference (or table) resolved; raises ConfigError naming `where` and the fix
    for a provider nobody configured."""
    choice = as_choice(spec)
    endpoint = endpoint_for(choice.name, where, model.home, providers)
    name = endpoint.model or choice.name
    capabilities = endpoint.capabilities
    if choice.capabilities is not None:
        capabilities = choice.capabilities.over(capabilities)
    return _ref(endpoint, name, capabilities, _window(choice, endpoint, name, model))


def model_chain(
    spec: ModelSpec | None,
    model: ModelSettings,
    providers: Mapping[str, ProviderSettings],
    where: str = "model",
) -> tuple[ModelRef, ...]:
    """The model `spec` names (None: `[model]`'s own), then its fallbacks (a table's own, else
    `[model] fallbacks`), in the order a call tries them."""
    choice = ModelChoice(name=model.name) if spec is None else as_choice(spec)
    fallbacks: Sequence[str] = model.fallbacks if choice.fallbacks is None else choice.fallbacks
    if spec is None:  # [model] name is a name on its own provider, colons and all
        home = model.home
        head = _ref(home, model.name, home.capabilities, model.window)
    else:
        head = resolve_model(choice, model, providers, where)
    named = "model.fallbacks" if spec is None or choice.fallbacks is None else f"{where}.fallbacks"
    rest = [
        resolve_model(ref, model, providers, f"{named}[{index}]")
        for index, ref in enumerate(fallbacks)
    ]
    return (head, *rest)


def endpoint_of(ref: ModelRef) -> Endpoint:
    """The endpoint a resolved model is called at (for key checks and `bot doctor`)."""
    caps = Capabilities(images=ref.images, documents=ref.documents, tools=ref.tools)
    wire: Wire = "openai" if ref.wire == "openai" else "anthropic"
    return Endpoint(ref.provider, wire, ref.base_url, ref.key_env, ref.name, caps, ref.key_required)


def _window(choice: ModelChoice, endpoint: Endpoint, name: str, model: ModelSettings) -> int:
    if choice.context_window is not None:
        return choice.context_window
    home = model.home
    if name == model.name and (endpoint.provider, endpoint.base_url) == (
        home.provider,
        home.base_url,
    ):
        return model.window
    return window_for(name)


def _ref(endpoint: Endpoint, name: str, caps: Capabilities, window: int) -> ModelRef:
    return ModelRef(
        provider=endpoint.provider,
        wire=endpoint.wire,
        name=name,
        base_url=endpoint.base_url,
        key_env=endpoint.key_env,
        context_window=window,
        images=bool(caps.images),
        documents=bool(caps.documents),
        tools=bool(caps.tools),
        key_required=endpoint.key_required,
    )
