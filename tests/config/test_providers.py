"""Model references and providers (SPEC §8): `NAME:model` resolves to its provider's endpoint,
a colon inside a model's name stays in the name, and a reference to no provider says the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli.settings import load_config
from bot.config import ModelSettings
from bot.config.providers import ProviderSettings
from bot.errors import ConfigError
from tests.conftest import write_config

LOCAL = ProviderSettings(wire="openai", base_url="http://127.0.0.1:11434/v1")


def test_references_resolve_to_their_providers() -> None:
    model = ModelSettings(fallbacks=["local:qwen3:32b", "openai:gpt-5-mini", "claude-haiku-4-5"])
    home, local, hosted, bare = model.endpoints({"local": LOCAL})
    assert (home.wire, home.model, home.key_env) == ("anthropic", None, "ANTHROPIC_API_KEY")
    assert (local.wire, local.model, local.base_url) == ("openai", "qwen3:32b", LOCAL.base_url)
    assert not local.key_required  # a local server without api_key_env needs no key
    assert (hosted.wire, hosted.key_env, hosted.key_required) == ("openai", "OPENAI_API_KEY", True)
    assert (bare.provider, bare.model) == ("anthropic", "claude-haiku-4-5")
    assert not local.capabilities.documents  # PDFs as markers on a compatible server
    assert home.capabilities.documents


def test_a_reference_to_no_provider_names_the_key_and_the_fix(agent_dir: Path) -> None:
    write_config(agent_dir, '[model]\nfallbacks = ["nope:some-model"]\n')
    with pytest.raises(ConfigError) as failed:
        load_config(agent_dir / "bot.toml", env={})
    assert "model.fallbacks[0]" in str(failed.value)
    assert "[providers.nope]" in str(failed.value)


def test_an_openai_model_reads_its_key_from_the_named_variable(agent_dir: Path) -> None:
    write_config(
        agent_dir,
        '[model]\nprovider = "openai"\nname = "gpt-5-mini"\napi_key_env = "MY_OPENAI_KEY"\n',
    )
    config = load_config(
        agent_dir / "bot.toml",
        env={"MY_OPENAI_KEY": "sk-proj-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    assert config.secrets.get("MY_OPENAI_KEY") == "sk-proj-test"
    assert config.settings.model.base_url is None  # ANTHROPIC_BASE_URL is not this wire's
    assert config.settings.model.encoding == "o200k_base"
    assert config.settings.model.calibration == 1.0
