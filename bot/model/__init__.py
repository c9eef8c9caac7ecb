"""The model runtime: the only importer of the model SDKs, `anthropic` and `openai` (tool loop,
retries, fallbacks, compaction).

`ModelClient` implements `bot.ports.model.ModelRuntime`; `ping()` backs `bot doctor`.
`AnthropicRuntime` is its earlier name, kept for the callers that know it.
"""

from bot.model.runtime import ModelClient

AnthropicRuntime = ModelClient

__all__ = ["AnthropicRuntime", "ModelClient"]
