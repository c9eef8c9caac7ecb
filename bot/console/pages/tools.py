"""Tools: each MCP server's health (up, or what is wrong, and how many tools it lists) and the
tools each surface rule is offered, as `bot tools` lists them."""

from __future__ import annotations

from aiohttp import web

from bot.console.pages.common import Console

NAV = ("tools", "Tools")


def install(app: web.Application, console: Console) -> None:
    async def page(request: web.Request) -> web.Response:
        return console.render.page(
            "tools.html",
            request,
            title="Tools",
            servers=console.inputs.servers(),
            offers=console.inputs.tools(),
        )

    app.router.add_get("/tools", page, name="tools")
