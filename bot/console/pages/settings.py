"""Config: the effective settings (file, environment, defaults) with every secret masked, and the
audit of every change operators made in the console (who, what, when, how it went)."""

from __future__ import annotations

from aiohttp import web

from bot.console.pages.common import Console

NAV = ("config", "Config")
AUDIT_NAV = ("audit", "Audit")


def install(app: web.Application, console: Console) -> None:
    async def config(request: web.Request) -> web.Response:
        return console.render.page(
            "config.html", request, title="Config", text=console.inputs.config_text()
        )

    async def audit(request: web.Request) -> web.Response:
        entries = await console.inputs.store.console.audited(limit=500)
        return console.render.page(
            "audit.html",
            request,
            title="Audit",
            entries=[
                {
                    "at": console.shown(e.at),
                    "operator": e.operator,
                    "action": e.action,
                    "target": e.target,
                    "outcome": e.outcome,
                }
                for e in entries
            ],
        )

    app.router.add_get("/config", config, name="config")
    app.router.add_get("/audit", audit, name="audit")
