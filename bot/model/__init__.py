"""The model runtime: the only importer of `anthropic` (tool loop, retries, compaction).

`AnthropicRuntime` implements `bot.ports.ModelRuntime`; `ping()` backs `bot doctor`.
"""

from bot.model.runtime import AnthropicRuntime

__all__ = ["AnthropicRuntime"]
