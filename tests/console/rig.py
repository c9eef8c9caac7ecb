"""The console on an in-memory store, served on loopback by aiohttp, and a client that signs in
and keeps the session cookie (plain http on loopback: the cookie is `Secure`, so this client
carries it by hand where a browser would treat localhost as a secure origin)."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from argon2 import PasswordHasher

from bot.console.app import build_console, mount
from bot.console.inputs import ConsoleInputs
from bot.console.settings import ConsoleSettings, Operator
from bot.policy.budget import BudgetSettings
from bot.testing.cron import MemoryCronRuns
from bot.testing.store import MemoryStore, open_memory_store

PASSWORD = "correct horse battery staple"
TOKEN = "console-token-0123456789-abcdef"
SECRET = "sk-ant-api03-SECRET-VALUE-0123456789"


@functools.cache
def password_hash() -> str:
    """An argon2id hash at the lowest cost (checking one reads its cost from the hash), so a
    sign-in in a test takes milliseconds; `bot console passwd` uses the library's defaults."""
    return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(PASSWORD)


def settings(**changes: Any) -> ConsoleSettings:
    return ConsoleSettings(
        enabled=True,
        operators=[
            Operator(name="ada", password_hash=password_hash(), approver="slack:U0BOB0001"),
            Operator(name="tok", token_env="CONSOLE_TOKEN"),
        ],
        **changes,
    )


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Client:
    """Requests to the console with this client's cookies."""

    session: aiohttp.ClientSession
    base: str  # http://127.0.0.1:PORT
    prefix: str  # the console's public path, e.g. /console
    cookies: dict[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"{self.base}{self.prefix}{path}"

    async def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, str, Any]:
        headers = {**kwargs.pop("headers", {})}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        async with self.session.request(
            method, self.url(path), headers=headers, allow_redirects=False, **kwargs
        ) as response:
            for name, morsel in response.cookies.items():
                if morsel.value:
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
            return response.status, await response.text(), response.headers

    async def get(self, path: str, **kwargs: Any) -> tuple[int, str, Any]:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, data: dict[str, str], **kwargs: Any) -> tuple[int, str, Any]:
        return await self.request("POST", path, data=data, **kwargs)

    async def sign_in(self, name: str = "ada", password: str = PASSWORD) -> tuple[int, str, Any]:
        _, page, _ = await self.get("/login")
        token = re.search(r'name="form_token" value="([^"]+)"', page)
        assert token is not None
        return await self.post(
            "/login", {"username": name, "password": password, "form_token": token.group(1)}
        )

    async def csrf(self, path: str = "/") -> str:
        _, page, _ = await self.get(path)
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found is not None, page[:500]
        return found.group(1)


@dataclass
class Rig:
    store: MemoryStore
    inputs: ConsoleInputs
    clock: Clock
    client: Client
    app: web.Application
    runs: Callable[[], Awaitable[MemoryCronRuns]]


@asynccontextmanager
async def console_rig(*, cron: bool = False, **input_changes: Any) -> AsyncIterator[Rig]:
    """The console over a new in-memory store; `cron`: with its cron records (pause, resume)."""
    clock = Clock()
    store = open_memory_store(clock=clock)
    records = MemoryCronRuns(store.opened)

    async def runs() -> MemoryCronRuns:
        return records

    inputs = ConsoleInputs(
        settings=settings(),
        store=store,
        budget=BudgetSettings(daily_usd=5.0),
        timezone="UTC",
        secrets={"CONSOLE_TOKEN": TOKEN, "ANTHROPIC_API_KEY": SECRET},
        clock=clock,
        runs=runs if cron else None,
    )
    inputs = replace(inputs, **input_changes)
    host = web.Application()
    console = build_console(inputs)
    mount(host, console, inputs.settings.path_prefix)
    server = TestServer(host, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
            base = f"http://127.0.0.1:{server.port}"
            client = Client(session, base, inputs.settings.path_prefix + "/console")
            yield Rig(store, inputs, clock, client, console, runs)
    finally:
        await server.close()
        await store.aclose()
