"""Pairing on Telegram (SPEC §19, `[access] unknown = "pair"`), end to end: the whole App with
python-telegram-bot polling the fake Bot API, and the real `bot access` command beside it."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.cli.conftest import run_command
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987
MALLORY_ID = 555_000_555
PAIR = '\n[access]\nunknown = "pair"\n'
CODE = re.compile(r"\b[A-Z2-9]{4}-[A-Z2-9]{4}\b")


async def test_an_unknown_user_gets_a_code_is_admitted_with_bot_access_approve_and_answered(
    tg: FakeTelegram,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    bot_command: list[str],
    agent_dir: Path,
) -> None:
    mallory = tg.user("Mallory", user_id=MALLORY_ID, username="mal")
    claude.script("Welcome, Mallory.")
    config = make_config(f"allowed_user_ids = [{ALICE_ID}]\n" + PAIR)
    cli = ("--config", str(agent_dir / "bot.toml"))

    def bot(*args: str) -> subprocess.CompletedProcess[str]:
        return run_command(bot_command, *args)

    with capture_logs() as logs:
        async with App(config) as app:
            await tg.push(tg.message(tg.private_chat(mallory), mallory, "let me in"))
            [offer] = await tg.wait_sent(1)
            [code] = set(CODE.findall(offer.plain))
            listed = await asyncio.to_thread(bot, "access", "list", *cli)
            approved = await asyncio.to_thread(bot, "access", "approve", code.lower(), *cli)
            again = await asyncio.to_thread(bot, "access", "approve", code, *cli)
            await tg.push(tg.message(tg.private_chat(mallory), mallory, "now?"))
            await tg.wait_sent(2)
            await app.host.idle()
    assert offer.chat_id == MALLORY_ID
    assert "bot access approve" in offer.plain
    assert "telegram:555000555" in listed.stdout
    assert "Mallory (@mal)" in listed.stdout
    assert code not in listed.stdout  # the store keeps only its digest
    assert (approved.returncode, approved.stdout.strip()) == (
        0,
        "Admitted telegram:555000555 (Mallory (@mal)).",
    )
    assert again.returncode == 1
    assert "Fix:" in again.stderr
    # Nothing Mallory wrote before reached the model; after the approval she is answered.
    assert len(claude.requests) == 1
    assert "let me in" not in str(claude.requests[0])
    assert "now?" in str(claude.requests[0]["messages"][-1])
    assert tg.sent[-1].plain == "Welcome, Mallory."
    assert not [e for e in logs if code in repr(e)]  # the code is never logged


async def test_with_pairing_and_no_allowlist_only_admitted_people_are_answered(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    mallory = tg.user("Mallory", user_id=MALLORY_ID)
    async with App(make_config(PAIR)) as app:
        for text in ("one", "two", "three", "four"):
            await tg.push(tg.message(tg.private_chat(mallory), mallory, text))
        await tg.wait_for(lambda: not tg.pending_updates)  # all four taken in
        await app.host.idle()
        asking = await app.store.access.asking()
    # A few codes an hour, only the newest valid; never a model call.
    assert len(tg.sent) == 3
    assert [a.person for a in asking] == ["telegram:555000555"]
    assert claude.requests == []
