"""Memory: search the long-term memory as `bot memory search` does, each hit with where its words
came from (its origin: a person's own words, someone unlisted, a bot, an agent, the operator or a
scheduled run; the conversation, surface, person and when), and forget one entry (audited)."""

from __future__ import annotations

from aiohttp import web

from bot.console.pages.common import Console

NAV = ("memory", "Memory")
MAX_QUERY = 500
HITS = 50


def install(app: web.Application, console: Console) -> None:
    async def page(request: web.Request) -> web.Response:
        return await _page(console, request, request.query.get("q", "")[:MAX_QUERY])

    async def forget(request: web.Request) -> web.Response:
        form = await request.post()
        memory_id = str(form.get("id", ""))[:100]
        query = str(form.get("q", ""))[:MAX_QUERY]
        forgot = bool(memory_id) and await console.inputs.store.memory.forget(memory_id)
        notice = (
            f"Forgot entry {memory_id}." if forgot else f"No entry {memory_id!r}: nothing changed."
        )
        await console.audit(request, "forget memory", f"memory {memory_id}", notice)
        return await _page(console, request, query, notice)

    app.router.add_get("/memory", page, name="memory")
    app.router.add_post("/memory/forget", forget, name="memory_forget")


async def _page(
    console: Console, request: web.Request, query: str, notice: str = ""
) -> web.Response:
    store = console.inputs.store
    hits = await store.memory.search(query, limit=HITS) if query.strip() else []
    return console.render.page(
        "memory.html",
        request,
        title="Memory",
        query=query,
        notice=notice,
        count=await store.memory.count(),
        hits=[
            {
                "id": hit.id,
                "text": hit.text,
                "conversation": hit.conversation_key,
                "surface": hit.surface,
                "person": hit.person or "–",
                "origin": str(hit.origin),
                "at": console.shown(hit.captured_at),
            }
            for hit in hits
        ],
    )
