"""Replicas (SPEC §13): host overhead and turns/s with 1 and 3 replicas on PostgreSQL, and one on
SQLite beside them, in one run.

    .venv/bin/python -m benchmarks.replicas [--chats N] [--rounds N] [--warmup N]
                                            [--postgres URL]

Every replica is a whole App (store, host lanes, assembler, memory capture, the Telegram channel
in webhook mode behind its own HTTP port) with the instant model of `benchmarks.overhead`. The
fake Bot API posts each update to a small balancer that forwards the updates to the replicas in
turn (round robin, not sticky: a chat's messages land on any replica, and the replicas' shared
inbox decides which one runs the chat, SPEC §13). All replicas run in this one process and share
its event loop and cores: the figures show what sharing one PostgreSQL database costs per turn,
not how much more a fleet of machines could do.

Each round is one message in every chat at once. Latency: update queued in the fake to last part
accepted by the fake. Printed per setup: p50, p99, turns/s, CPU per turn (here this whole
process's, replicas and fakes together: compare setups with it, not with `host_telegram`), lost
and duplicated replies, per-chat order. `--postgres` is an admin URL (default:
$TEST_POSTGRES_URL, else the local server); a throwaway database is created there (a schema in it
for each setup) and dropped after, by a detached process (the drop's checkpoint is not waited
for). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import structlog
from aiohttp import web

from benchmarks.host_telegram import in_order, run_round
from benchmarks.overhead import (
    Figures,
    InstantModel,
    measure,
    throwaway_database,
)
from bot.cli.compose import App
from bot.cli.settings import load_config
from tests import postgres
from tests.fakes.telegram import FakeTelegram

SECRET = "bench-webhook-secret"


class Balancer:
    """One webhook URL in front of the replicas, handing each update to the next replica."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self._app = web.Application()
        self._app.router.add_post("/telegram/webhook", self._forward)
        self._runner = web.AppRunner(self._app, access_log=None)
        self._session: aiohttp.ClientSession | None = None
        self.url = ""
        self._next = 0

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/telegram/webhook"
        self._session = aiohttp.ClientSession()

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        port = self.ports[self._next % len(self.ports)]
        self._next += 1
        assert self._session is not None
        async with self._session.post(
            f"http://127.0.0.1:{port}/telegram/webhook", data=body, headers=request.headers
        ) as answer:
            return web.Response(status=answer.status, body=await answer.read())


def write_config(folder: Path, api_url: str, webhook_url: str, store_url: str | None) -> Path:
    (folder / "IDENTITY.md").write_text("# Identity\n\nYou are Benchbot.\n", encoding="utf-8")
    store = f'url = "{store_url}"' if store_url else 'path = "data/bot.sqlite3"'
    path = folder / "bot.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            [agent]
            identity_path = "IDENTITY.md"

            [store]
            {store}

            [host]
            turns_per_person_per_minute = 0
            queue_per_conversation = 64

            [http]
            port = 0

            [telegram]
            enabled = true
            mode = "webhook"
            api_url = "{api_url}"
            webhook_url = "{webhook_url}"
            """
        ),
        encoding="utf-8",
    )
    return path


async def scenario(
    name: str, replicas: int, store_url: str | None, args: argparse.Namespace, folder: Path
) -> Figures:
    balancer = Balancer()
    await balancer.start()
    try:
        async with FakeTelegram() as tg, contextlib.AsyncExitStack() as stack:
            env = {
                "TELEGRAM_BOT_TOKEN": tg.token,
                "TELEGRAM_WEBHOOK_SECRET": SECRET,
                "ANTHROPIC_API_KEY": "sk-ant-bench-0000",
            }
            config = load_config(
                write_config(folder, tg.base_url, balancer.url, store_url), env=env
            )
            apps = [
                await stack.enter_async_context(App(config, model=InstantModel()))
                for _ in range(replicas)
            ]
            balancer.ports = [int(app.http_port or 0) for app in apps]
            people = [
                tg.user(f"Person{i}", "Bench", f"person{i}", user_id=10_000 + i)
                for i in range(args.chats)
            ]
            pairs = [(tg.private_chat(user), user) for user in people]

            async def settle() -> float:
                await asyncio.gather(*(app.host.idle() for app in apps))
                return time.process_time()  # the replicas share this process with the fakes

            measured = await measure(
                lambda number: run_round(tg, pairs, number), args.warmup, args.rounds, settle
            )
            await settle()
            return measured.figures(name, args.chats * args.rounds, in_order(tg), instant=True)
    finally:
        await balancer.stop()


async def new_schema(url: str, name: str) -> str:
    """A fresh schema in the database at `url`, and the URL that uses it."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(f"CREATE SCHEMA {name}")
    finally:
        await conn.close()
    return urlunsplit(urlsplit(url)._replace(query=f"search_path={name}"))


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100, help="chats, one message each a round")
    parser.add_argument("--rounds", type=int, default=10, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds first")
    parser.add_argument("--postgres", default=postgres.admin_url())
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(f"Replicas: {args.chats} Telegram chats (webhook), instant model, one process")
    with tempfile.TemporaryDirectory() as folder:
        print((await scenario("sqlite, 1", 1, None, args, Path(folder))).show())
    try:
        async with throwaway_database(args.postgres) as url:
            for replicas in (1, 3):
                # A schema of its own: the fake numbers its updates from 1 again, and a shared
                # ledger would (rightly) take them for redeliveries.
                schema = await new_schema(url, f"replicas_{replicas}")
                with tempfile.TemporaryDirectory() as folder:
                    name = f"postgres, {replicas}"
                    print((await scenario(name, replicas, schema, args, Path(folder))).show())
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"postgresql: skipped ({args.postgres} not reachable: {type(exc).__name__})")


if __name__ == "__main__":
    main()
