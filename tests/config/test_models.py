"""`resolve_model` and `model_chain` (bot.config.models): one reference, one endpoint, wherever it
is written ([model], its fallbacks, a surface rule as a string or a table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli.settings import load_config
from bot.config import ModelSettings
from bot.config.models import model_chain, resolve_model
from bot.config.providers import Capabilities, ProviderSettings
from bot.errors import ConfigError
from bot.policy.files import load_policy
from bot.policy.models import ModelChoice
from bot.prompt import AgentTexts
from bot.turnprep import surface_prompt
from tests.conftest import write_config

LOCAL = ProviderSettings(
    wire="openai",
    base_url="http://127.0.0.1:11434/v1",
    api_key_env="LOCAL_API_KEY",
    capabilities=Capabilities(images=False),
)
PROVIDERS = {"local": LOCAL}


def test_a_reference_resolves_to_provider_wire_name_capabilities_and_window() -> None:
    model = ModelSettings(name="claude-sonnet-4-5", context_window=150_000)
    local = resolve_model("local:qwen3:32b", model, PROVIDERS)
    assert (local.provider, local.wire, local.name) == ("local", "openai", "qwen3:32b")
    assert (local.base_url, local.key_env) == (LOCAL.base_url, "LOCAL_API_KEY")
    assert (local.images, local.documents, local.tools) == (False, False, True)
    assert local.context_window == 200_000  # the common default: nothing known about qwen3
    assert local.label == "local:qwen3:32b"
    hosted = resolve_model("openai:gpt-4o", model, PROVIDERS)
    assert (hosted.wire, hosted.base_url, hosted.context_window) == ("openai", None, 128_000)
    own = resolve_model("claude-sonnet-4-5", model, PROVIDERS)
    assert (own.provider, own.context_window) == ("anthropic", 150_000)  # [model]'s window


def test_a_table_sets_its_own_window_capabilities_and_fallbacks() -> None:
    model = ModelSettings(fallbacks=["openai:gpt-5-mini"])
    choice = ModelChoice(
        name="local:qwen3",
        context_window=32_768,
        capabilities=Capabilities(images=True, tools=False),
        fallbacks=["anthropic:claude-haiku-4-5"],
    )
    head, fallback = model_chain(choice, model, PROVIDERS, "surfaces[0].model")
    assert (head.context_window, head.images, head.tools) == (32_768, True, False)
    assert (fallback.wire, fallback.name) == ("anthropic", "claude-haiku-4-5")
    # A string keeps [model]'s fallbacks; a table's `fallbacks = []` has none.
    assert [r.label for r in model_chain("local:qwen3", model, PROVIDERS)] == [
        "local:qwen3",
        "openai:gpt-5-mini",
    ]
    alone = ModelChoice(name="local:qwen3", fallbacks=[])
    assert len(model_chain(alone, model, PROVIDERS)) == 1


def test_the_models_own_name_keeps_its_colon() -> None:
    model = ModelSettings(provider="openai", name="qwen3:32b", base_url=LOCAL.base_url)
    [home] = model_chain(None, model, PROVIDERS)
    assert (home.provider, home.name, home.base_url) == ("openai", "qwen3:32b", LOCAL.base_url)
    assert not home.key_required


def test_an_unknown_provider_in_a_rule_names_the_rule_and_the_fix(agent_dir: Path) -> None:
    write_config(agent_dir, '[[surfaces]]\nplatform = "slack"\nmodel = "nope:qwen3"\n')
    with pytest.raises(ConfigError) as failed:
        load_config(agent_dir / "bot.toml", env={})
    assert "surfaces[0].model" in str(failed.value)
    assert "Fix:" in str(failed.value)


def test_a_rule_with_a_model_table_reaches_the_turns_surface_prompt(agent_dir: Path) -> None:
    write_config(
        agent_dir,
        '[providers.local]\nwire = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n'
        'api_key_env = "LOCAL_API_KEY"\n\n'
        '[[surfaces]]\nplatform = "telegram"\n'
        'model = { name = "local:qwen3", context_window = 32768, fallbacks = [], '
        "capabilities = { images = false } }\n",
    )
    config = load_config(agent_dir / "bot.toml", env={"LOCAL_API_KEY": "sk-local"})
    assert "LOCAL_API_KEY" in config.settings.secret_names()
    assert [e.label for e in config.settings.model_endpoints()] == ["anthropic", "local:qwen3"]
    policy = load_policy(config.settings, AgentTexts("", "I am a test.", (), ()))
    [rule] = policy.policies.all
    surface = surface_prompt(rule)
    assert surface.model == "qwen3"
    [ref] = surface.models
    assert (ref.wire, ref.context_window, ref.images) == ("openai", 32_768, False)
