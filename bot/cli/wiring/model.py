"""The model client the configuration names, and the start-up check of its key (the key
itself is `bot.cli.compose.require_api_key`'s)."""

from __future__ import annotations

import ssl

import structlog

from bot.config import ModelSettings
from bot.errors import ConfigError, ModelAuthError, ModelError
from bot.ports.model import ModelRuntime
from bot.prompt import TokenCounter

log = structlog.get_logger(__name__)


def build_model(
    settings: ModelSettings, key: str, counter: TokenCounter, tls: ssl.SSLContext
) -> ModelRuntime:
    from bot.model import AnthropicRuntime

    return AnthropicRuntime(settings, key, counter, tls=tls)


async def verify_model(model: ModelRuntime) -> None:
    """A refused key stops start-up (nothing could be answered); a model API that is down
    right now does not (turns retry, and it may be back by the first message)."""
    from bot.model import AnthropicRuntime

    if not isinstance(model, AnthropicRuntime):
        return
    try:
        await model.check_key()
    except ModelAuthError as exc:
        raise ConfigError(str(exc)) from None
    except ModelError as exc:
        log.warning("model_check_failed", error=str(exc))
