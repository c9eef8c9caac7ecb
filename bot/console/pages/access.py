"""Access: who was admitted with a pairing code (SPEC §19) and the codes still waiting; admit a
person by the code they were sent, or take an admission back, as `bot access` does (audited)."""

from __future__ import annotations

from aiohttp import web

from bot.console.pages.common import Console

NAV = ("access", "Access")
MAX_FIELD = 100


def install(app: web.Application, console: Console) -> None:
    async def page(request: web.Request) -> web.Response:
        return await _page(console, request)

    async def approve(request: web.Request) -> web.Response:
        form = await request.post()
        code = str(form.get("code", "")).strip()[:MAX_FIELD]
        admitted = await console.inputs.store.access.approve(code) if code else None
        if admitted is None:
            notice = (
                "No such code waiting (unknown, used, or expired after an hour). Fix: ask the "
                "person to write to the bot again for a new code."
            )
        else:
            notice = f"Admitted {admitted.person} ({admitted.label})."
        target = admitted.person if admitted is not None else "a code"
        await console.audit(request, "admit", target, notice)
        return await _page(console, request, notice)

    async def revoke(request: web.Request) -> web.Response:
        form = await request.post()
        person = str(form.get("person", ""))[:MAX_FIELD]
        revoked = await console.inputs.store.access.revoke(person)
        notice = f"Revoked {person}." if revoked else f"{person} is not admitted: nothing changed."
        await console.audit(request, "revoke access", person, notice)
        return await _page(console, request, notice)

    app.router.add_get("/access", page, name="access")
    app.router.add_post("/access/approve", approve, name="access_approve")
    app.router.add_post("/access/revoke", revoke, name="access_revoke")


async def _page(console: Console, request: web.Request, notice: str = "") -> web.Response:
    access = console.inputs.store.access
    return console.render.page(
        "access.html",
        request,
        title="Access",
        notice=notice,
        people=[
            {"person": p.person, "label": p.label, "at": console.shown(p.admitted_at)}
            for p in await access.people()
        ],
        asking=[
            {"person": a.person, "label": a.label, "expires": console.shown(a.expires_at)}
            for a in await access.asking()
        ],
    )
