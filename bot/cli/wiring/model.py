"""The model client the configuration names, and the start-up check of its key (the key
itself is `bot.cli.compose.require_api_key`'s)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence

import structlog

from bot.config import ModelSettings
from bot.config.providers import Endpoint, ProviderSettings
from bot.errors import ConfigError, ModelAuthError, ModelError
from bot.ports.model import ModelRuntime
from bot.prompt import TokenCounter

log = structlog.get_logger(__name__)


def build_model(
    settings: ModelSettings,
    keys: Sequence[tuple[Endpoint, str]],
    counter: TokenCounter,
    tls: ssl.SSLContext,
    providers: Mapping[str, ProviderSettings],
) -> ModelRuntime:
    """The runtime over the model's endpoint, its fallbacks' and the surface rules' (`keys`:
    each endpoint with its key, the model's first)."""
    from bot.model import ModelClient

    (_, key), *others = keys
    named = {e.key_env: k for e, k in others if e.key_env}
    return ModelClient(settings, key, counter, tls=tls, providers=providers, keys=named)


async def verify_model(model: ModelRuntime) -> None:
    """A refused key stops start-up (nothing could be answered); a model API that is down
    right now does not (turns retry, and it may be back by the first message)."""
    from bot.model import ModelClient

    if not isinstance(model, ModelClient):
        return
    try:
        await model.check_key()
    except ModelAuthError as exc:
        raise ConfigError(str(exc)) from None
    except ModelError as exc:
        log.warning("model_check_failed", error=str(exc))
