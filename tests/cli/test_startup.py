"""`bot COMMAND --help` starts at once: it loads no SDK, no pydantic and no store engine (what it
imports is checked, not how long it takes)."""

from __future__ import annotations

import json
import subprocess
import sys

from bot.cli import COMMANDS
from tests.cli.conftest import REPO
from tests.conftest import subprocess_env

# What a --help must not import: the SDKs, and what makes up most of a start-up's time.
HEAVY = (
    "asyncio",
    "anthropic",
    "mcp",
    "openai",
    "slack_bolt",
    "slack_sdk",
    "telegram",
    "httpx",
    "pydantic",
    "structlog",
    "aiosqlite",
    "asyncpg",
    "tiktoken",
)

# One fresh interpreter (not the tests' warm server, which has everything loaded) runs every
# command's --help in turn and says which heavy packages each one brought in.
_PROBE = """
import contextlib, io, json, sys
from bot.cli import COMMANDS, main
heavy = set(sys.argv[1:])
loaded = {}
for name in COMMANDS:
    before = {m.partition(".")[0] for m in sys.modules}
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main([name, "--help"])
        except SystemExit:
            pass
    after = {m.partition(".")[0] for m in sys.modules}
    loaded[name] = sorted((after - before) & heavy)
print(json.dumps(loaded))
"""


def _loaded_by_help() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *HEAVY],
        capture_output=True,
        text=True,
        env=subprocess_env(PYTHONPATH=str(REPO)),
        cwd=REPO,
        timeout=60,
        check=True,
    )
    loaded: dict[str, list[str]] = json.loads(done.stdout)
    return loaded


def test_no_help_imports_an_sdk_or_the_config_models() -> None:
    loaded = _loaded_by_help()
    assert set(loaded) == set(COMMANDS)  # every command was asked, a new one included
    assert {name: found for name, found in loaded.items() if found} == {}
