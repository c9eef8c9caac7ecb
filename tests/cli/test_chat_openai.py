"""`bot chat` with only `provider = "openai"` and a `base_url` at the fake Chat Completions
server: the answers stream to the terminal through the real `openai` SDK."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_chat_history import _bot
from tests.conftest import write_config
from tests.fakes.openai import FakeOpenAI


async def test_piped_chat_on_an_openai_compatible_model(
    bot_command: list[str], agent_dir: Path, gpt: FakeOpenAI
) -> None:
    write_config(
        agent_dir,
        f'[model]\nprovider = "openai"\nname = "qwen3-32b"\nbase_url = "{gpt.base_url}"\n',
    )
    gpt.script("one two three", "four")
    code, output = await _bot(
        bot_command,
        agent_dir,
        "chat",
        stdin="first\nsecond\n",
        env={"OPENAI_API_KEY": "sk-openai-test"},
    )
    assert code == 0, output
    assert output.splitlines()[:2] == ["one two three", "four"]
    assert [body["model"] for body in gpt.requests] == ["qwen3-32b", "qwen3-32b"]
    assert gpt.requests[0]["stream"] is True
    # The second request repeats the first's system messages byte for byte (the cached prefix),
    # then the first turn as history (without its turn context, which is never stored).
    first, second = (body["messages"] for body in gpt.requests)
    assert second[: len(first) - 1] == first[:-1]
    assert second[len(first) - 1] == {"role": "user", "content": "first"}


async def test_chat_without_the_key_names_the_variable(
    bot_command: list[str], agent_dir: Path
) -> None:
    write_config(agent_dir, '[model]\nprovider = "openai"\nname = "gpt-5-mini"\n')
    code, output = await _bot(bot_command, agent_dir, "chat", stdin="hi\n", env={})
    assert code == 2, output
    assert "OPENAI_API_KEY is not set" in output
    assert "Fix:" in output
