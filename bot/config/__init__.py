"""Configuration: the core's sections, and loading (defaults < TOML file < environment) and
validation against the composition root's model, which adds each part's own section.

Secrets never come from the file: they are read from the environment (and a `.env` file) into
`Secrets`. Every validation failure becomes one `ConfigError` naming the key, the value and the fix.

The package's modules: `sections` (the core's sections and `CoreSettings`), `secrets`, `load`
(reading the file, `load_config`), `env` (the `BOT_` overrides) and `explain` (validation
failures as messages). Its public names are gathered here.
"""

from bot.config.load import Config, load_config
from bot.config.secrets import Secrets
from bot.config.sections import (
    AgentSettings,
    AttachmentSettings,
    CoreSettings,
    HostSettings,
    HttpSettings,
    LoggingSettings,
    MemorySettings,
    ModelSettings,
    OtelSettings,
    PromptSettings,
    Section,
    StoreSettings,
    check_files,
    check_store_url,
    check_timezone,
)

__all__ = [
    "AgentSettings",
    "AttachmentSettings",
    "Config",
    "CoreSettings",
    "HostSettings",
    "HttpSettings",
    "LoggingSettings",
    "MemorySettings",
    "ModelSettings",
    "OtelSettings",
    "PromptSettings",
    "Secrets",
    "Section",
    "StoreSettings",
    "check_files",
    "check_store_url",
    "check_timezone",
    "load_config",
]
