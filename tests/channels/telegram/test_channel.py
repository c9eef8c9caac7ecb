"""The channel on its own: its polling loop against the fake, a recording sink, the real SQLite
buffer. What the host does with a turn is the scenario tests' business; here it is intake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.config import MemorySettings, Secrets, StoreSettings
from bot.errors import ConfigError
from bot.ports.intake import Admission
from bot.store.sqlite import SqliteStore, open_store
from channels.telegram.channel import BOT_API_CONNECTIONS, TelegramChannel, check_token
from channels.telegram.settings import TelegramSettings
from tests.fakes.telegram import FakeTelegram
from tests.sinks import RecordingSink as Sink
from tests.waiting import until


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await open_store(StoreSettings(path=tmp_path / "bot.sqlite3"), MemorySettings())
    yield store
    await store.aclose()


def settings(tg: FakeTelegram, **values: object) -> TelegramSettings:
    return TelegramSettings(enabled=True, api_url=tg.base_url, **values)  # type: ignore[arg-type]


def secrets(tg: FakeTelegram, **values: str) -> Secrets:
    return Secrets({"TELEGRAM_BOT_TOKEN": tg.token, **values})


async def test_refused_turn_puts_the_group_context_back(
    tg: FakeTelegram, store: SqliteStore
) -> None:
    channel = TelegramChannel(settings(tg), secrets(tg), buffer=store.buffer)
    sink = Sink(Admission.BUSY, store.inbox)
    group = tg.group(-77, "Crew")
    dana, alice = tg.user("Dana"), tg.user("Alice")
    await channel.start(sink)
    try:
        await tg.push(tg.message(group, dana, "context line"))
        await tg.push(tg.message(group, alice, "first try", mention=True))
        await tg.wait_for(lambda: len(sink.requests) == 1)
        sink.answer = Admission.ACCEPTED
        await tg.push(tg.message(group, alice, "second try", mention=True))
        await tg.wait_for(lambda: len(sink.requests) == 2)
    finally:
        await channel.stop()
    refused, accepted = sink.requests
    assert [m.text for m in refused.preceding] == ["context line"]
    assert [m.text for m in accepted.preceding] == ["context line"]


async def _rename(store: SqliteStore, table: str, to: str) -> None:
    async def rename(conn: Any) -> None:
        await conn.execute(f"ALTER TABLE {table} RENAME TO {to}")

    await store.db.write(rename)


async def test_group_chatter_the_store_cannot_write_is_not_confirmed_and_is_kept_once(
    tg: FakeTelegram, store: SqliteStore
) -> None:
    """A group message that starts no turn is recorded as seen and buffered in one write: when
    that write fails nothing of it is recorded and the update is not confirmed, so it comes
    again and is kept (once) for the next turn there."""
    channel = TelegramChannel(settings(tg), secrets(tg), buffer=store.buffer)
    sink = Sink(Admission.ACCEPTED, store.inbox)
    group = tg.group(-79, "Crew")
    dana, alice = tg.user("Dana"), tg.user("Alice")
    await _rename(store, "chat_buffer", "chat_buffer_away")  # the buffer's write fails
    await channel.start(sink)
    try:
        chatter = await tg.push(tg.message(group, dana, "context line"))
        await tg.wait_for(lambda: sink.unwritten)
        assert tg.pending_updates == [chatter]  # not confirmed: Telegram keeps it
        await _rename(store, "chat_buffer_away", "chat_buffer")
        await tg.push(tg.message(group, alice, "what did Dana say?", mention=True))
        await tg.wait_for(lambda: len(sink.requests) == 1)
    finally:
        await channel.stop()
    assert [m.text for m in sink.requests[0].preceding] == ["context line"]


async def test_stop_confirms_what_was_handled(tg: FakeTelegram, store: SqliteStore) -> None:
    channel = TelegramChannel(settings(tg), secrets(tg), buffer=store.buffer)
    sink = Sink()
    alice = tg.user("Alice")
    await channel.start(sink)
    assert channel.connected
    await tg.push(tg.message(tg.private_chat(alice), alice, "hello"))
    await tg.wait_for(lambda: len(sink.requests) == 1)
    await channel.stop()
    assert not channel.connected
    assert tg.pending_updates == []
    assert [c.method for c in tg.calls][:2] == ["getMe", "deleteWebhook"]


async def test_commands_are_registered_and_a_refusal_does_not_stop_start_up(
    tg: FakeTelegram, store: SqliteStore
) -> None:
    channel = TelegramChannel(settings(tg), secrets(tg), buffer=store.buffer)
    tg.fail("setMyCommands", status=400, description="Bad Request: BOT_COMMAND_INVALID")
    await channel.start(Sink())
    assert channel.connected
    assert tg.commands == []
    await channel.stop()
    await channel.start(Sink())
    await channel.stop()
    # SPEC §7 Telegram: /help lists the commands, and they are registered with setMyCommands:
    # in private chats every command the host answers itself, /help first; in groups (and by
    # default) not /usage (answered only in private) nor /compact (the whole group's history).
    menus = {scope: [c["command"] for c in listed] for scope, listed in tg.menus.items()}
    assert menus == {
        "all_private_chats": ["help", "compact", "memory", "forget", "usage"],
        "all_group_chats": ["help", "memory", "forget"],
        "default": ["help", "memory", "forget"],
    }


async def test_sends_beyond_the_pool_wait_for_a_free_connection_and_none_fails(
    tg: FakeTelegram, store: SqliteStore
) -> None:
    """More sends at once than the Bot API pool has connections: the others wait for one,
    however long the first ones take (none fails on PTB's one-second pool timeout)."""
    channel = TelegramChannel(settings(tg), secrets(tg), buffer=store.buffer)
    await channel.start(Sink(Admission.ACCEPTED, store.inbox))
    try:
        tg.hold("sendMessage")
        route = channel.deliverer.route_to(str(tg.group(-4242, "Crew")["id"]))
        texts = [f"notice {n}" for n in range(BOT_API_CONNECTIONS + 4)]
        sends = [
            asyncio.create_task(channel.deliverer.post_text(route, text, notice_id=text))
            for text in texts
        ]
        await until(lambda: tg.held.count("sendMessage") == BOT_API_CONNECTIONS)
        await asyncio.sleep(1.5)  # the waiting sends outlast PTB's default pool timeout
        tg.release("sendMessage")
        reports = await asyncio.gather(*sends)
    finally:
        await channel.stop()
    assert [report.error for report in reports] == [None] * len(texts)
    assert sorted(sent.text for sent in tg.sent) == sorted(texts)


def test_a_missing_token_is_a_clear_error(tg: FakeTelegram, store: SqliteStore) -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN is not set"):
        TelegramChannel(settings(tg), Secrets({}), buffer=store.buffer)


def test_webhook_mode_needs_the_http_server(tg: FakeTelegram, store: SqliteStore) -> None:
    with pytest.raises(ConfigError, match=r"\[http\]"):
        TelegramChannel(
            settings(tg, mode="webhook"),
            secrets(tg, TELEGRAM_WEBHOOK_SECRET="s"),
            None,
            buffer=store.buffer,
        )


async def test_webhook_refuses_what_is_not_an_update(tg: FakeTelegram, store: SqliteStore) -> None:
    http = web.Application()
    channel = TelegramChannel(
        settings(tg, mode="webhook"),
        secrets(tg, TELEGRAM_WEBHOOK_SECRET="s3cret"),
        http,
        buffer=store.buffer,
    )
    runner = web.AppRunner(http)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}/telegram/webhook"
    headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
    statuses = []
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=b"{}", headers=headers) as response:
                statuses.append(response.status)  # not started yet
            await channel.start(Sink())
            for body in (b"not json", b"[1, 2]", b'{"message": {}}'):
                async with session.post(url, data=body, headers=headers) as response:
                    statuses.append(response.status)
    finally:
        await channel.stop()
        await runner.cleanup()
    assert statuses == [503, 400, 400, 400]


async def test_check_token_for_bot_doctor(tg: FakeTelegram) -> None:
    assert await check_token(settings(tg), secrets(tg)) == (
        f"@{tg.username} answered getMe; privacy mode off: group chatter is used as context"
    )
    with pytest.raises(ConfigError, match="refused TELEGRAM_BOT_TOKEN"):
        await check_token(settings(tg), Secrets({"TELEGRAM_BOT_TOKEN": "1:wrong"}))
    with pytest.raises(ConfigError, match="not set"):
        await check_token(settings(tg), Secrets({}))


async def test_a_refused_token_fails_start_without_quoting_it(
    tg: FakeTelegram, store: SqliteStore
) -> None:
    wrong = "999:not-the-token-at-all-0123456789abcdef"
    channel = TelegramChannel(
        settings(tg), Secrets({"TELEGRAM_BOT_TOKEN": wrong}), buffer=store.buffer
    )
    with pytest.raises(ConfigError, match="refused TELEGRAM_BOT_TOKEN") as caught:
        await channel.start(Sink())
    assert wrong not in str(caught.value)
    assert caught.value.__suppress_context__
    assert not channel.connected
    await until(lambda: tg.open_connections == 0)  # the failed start closed its HTTP clients
