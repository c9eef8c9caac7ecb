"""`bot run`'s HTTP port serves the console only when `[console]` enables it and names an
operator, under a reverse proxy's path prefix when one is set; a page that fails to read the store
is a clear page, not a traceback."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from bot.cli.compose import App
from bot.cli.settings import load_config
from tests.conftest import write_config
from tests.console.rig import console_rig, password_hash
from tests.fakes.anthropic import FakeAnthropic

OPERATOR = '\n[[console.operators]]\nname = "ada"\npassword_hash = "{hash}"\n'


async def _console_status(agent_dir: Path, claude: FakeAnthropic, console: str) -> int:
    write_config(agent_dir, "[console]\n" + console)
    config = load_config(
        agent_dir / "bot.toml",
        env={
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "BOT_HTTP__ENABLED": "true",
            "BOT_HTTP__PORT": "0",
        },
    )
    async with App(config, channels=[]) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}/console/"
        async with session.get(url, allow_redirects=False) as response:
            return response.status


async def test_the_console_is_served_only_when_enabled_with_an_operator(
    agent_dir: Path, claude: FakeAnthropic
) -> None:
    operator = OPERATOR.format(hash=password_hash())
    assert await _console_status(agent_dir, claude, "enabled = false\n" + operator) == 404
    assert await _console_status(agent_dir, claude, "enabled = true\n") == 404
    assert await _console_status(agent_dir, claude, "enabled = true\n" + operator) == 303


async def test_behind_a_path_prefix_links_redirects_and_the_cookie_carry_it() -> None:
    async with console_rig() as plain:
        settings = plain.inputs.settings.model_copy(update={"path_prefix": "/ops"})
    async with console_rig(settings=settings) as rig:
        rig.client.prefix = "/console"  # the proxy has stripped /ops
        status, _, headers = await rig.client.get("/usage")
        assert headers["Location"].startswith("/ops/console/login?next=")
        status, _, headers = await rig.client.sign_in()
        assert (status, headers["Location"]) == (303, "/ops/console/")
        assert "Path=/ops/console" in headers["Set-Cookie"]
        _, page, _ = await rig.client.get("/")
        assert 'href="/ops/console/static/console.css"' in page
        assert 'action="/ops/console/logout"' in page


async def test_a_page_whose_store_fails_is_a_clear_page_not_a_traceback() -> None:
    async with console_rig() as rig:
        await rig.client.sign_in()
        with rig.store.tables.failing("turn_records"):
            rig.store.opened.closed = True
            status, page, _ = await rig.client.get("/")
            rig.store.opened.closed = False
    assert status == 503
    assert "cannot be shown right now" in page
    assert "Traceback" not in page


def test_the_effective_config_masks_hashes_and_secrets_and_names_which_are_set(
    agent_dir: Path,
) -> None:
    from bot.cli.wiring.console import effective_config

    write_config(
        agent_dir,
        "[console]\nenabled = true\n"
        + OPERATOR.format(hash=password_hash())
        + '\n[[console.operators]]\nname = "tok"\ntoken_env = "CONSOLE_TOKEN_TOK"\n',
    )
    secret = "console-token-SECRET-0042"
    config = load_config(agent_dir / "bot.toml", env={"CONSOLE_TOKEN_TOK": secret})
    text = effective_config(config)
    assert password_hash() not in text
    assert '"password_hash": "(hidden)"' in text
    assert '"token_env": "CONSOLE_TOKEN_TOK"' in text
    assert secret not in text
    assert "CONSOLE_TOKEN_TOK: set" in text
    assert "ANTHROPIC_API_KEY: not set" in text
