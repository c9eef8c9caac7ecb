"""The console as an aiohttp application, mounted by the composition root at `/console` on the
host's HTTP port: the sign-in routes, the two static files (behind the session like every page)
and each page's routes, all passing the guard (`bot.console.auth`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.console.auth import Gate
from bot.console.inputs import ConsoleInputs
from bot.console.pages import (
    access,
    approvals,
    conversations,
    memory,
    overview,
    schedules,
    settings,
    tools,
    usage,
)
from bot.console.pages.common import Console
from bot.console.render import CSS, SCRIPT, Renderer

MOUNT = "/console"
PAGES = (overview, conversations, usage, approvals, schedules, access, tools, memory, settings)


def build_console(inputs: ConsoleInputs) -> web.Application:
    """The console's application; mount it with `mount(host_app, console)`."""
    nav = [page.NAV for page in PAGES] + [settings.AUDIT_NAV]
    renderer = Renderer(inputs.settings.path_prefix + MOUNT, inputs.secrets.values(), nav)
    gate = Gate(inputs, renderer)
    app = web.Application(middlewares=[gate.guard])
    app.router.add_get("/login", gate.login_page, name="login")
    app.router.add_post("/login", gate.login, name="login_post")
    app.router.add_post("/logout", gate.logout, name="logout")
    app.router.add_get("/static/console.css", _static(CSS, "text/css"), name="css")
    app.router.add_get("/static/live.js", _static(SCRIPT, "text/javascript"), name="script")
    console = Console(inputs, renderer)
    for page in PAGES:
        page.install(app, console)
    return app


def mount(host_app: web.Application, console: web.Application, prefix: str) -> None:
    """Serve `console` under /console (and send a bare /console to its overview)."""
    host_app.add_subapp(MOUNT, console)

    async def to_overview(request: web.Request) -> web.Response:
        return web.Response(status=308, headers={"Location": f"{prefix}{MOUNT}/"})

    host_app.router.add_get(MOUNT, to_overview)


def _static(text: str, content_type: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type=content_type)

    return handler
