"""What a model accepts (`capabilities`) and how a rule or an agent names its model: a reference
string (`"claude-haiku-4-5"`, `"local:qwen3"`) or a table with its own fallbacks, window and
capabilities. Plain values: `bot.config.models.resolve_model` turns them into endpoints."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Wire = Literal["anthropic", "openai"]
ModelName = Annotated[str, Field(min_length=1, max_length=200)]


class Capabilities(BaseModel):
    """What a model's server accepts; what it does not gets markers, never a request it refuses.
    Unset: the wire's default (Anthropic: everything; OpenAI-compatible: images and tools, PDFs
    as markers, since most compatible servers refuse file parts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    images: bool | None = None
    documents: bool | None = None
    tools: bool | None = None

    def on(self, wire: Wire) -> Capabilities:
        """Every capability decided, the wire's default where this leaves it unset."""
        documents = wire == "anthropic"
        return Capabilities(
            images=True if self.images is None else self.images,
            documents=documents if self.documents is None else self.documents,
            tools=True if self.tools is None else self.tools,
        )

    def over(self, base: Capabilities) -> Capabilities:
        """These capabilities where set, `base`'s elsewhere."""
        return Capabilities(
            images=base.images if self.images is None else self.images,
            documents=base.documents if self.documents is None else self.documents,
            tools=base.tools if self.tools is None else self.tools,
        )


class ModelChoice(BaseModel):
    """A model named with its own settings: `{ name = "local:qwen3", fallbacks = [...] }`.
    `fallbacks` unset: `[model] fallbacks`; `[]`: none (a local model whose data must stay)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ModelName
    fallbacks: Annotated[list[ModelName], Field(max_length=8)] | None = None
    context_window: Annotated[int, Field(ge=1024, le=10_000_000)] | None = None
    capabilities: Capabilities | None = None


ModelSpec = ModelName | ModelChoice


def as_choice(spec: ModelSpec) -> ModelChoice:
    return spec if isinstance(spec, ModelChoice) else ModelChoice(name=spec)
