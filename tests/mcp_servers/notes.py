"""A notes server for the tests: `python tests/mcp_servers/notes.py [--http PORT]`.

Tools: `add`, `search` and `delete` (notes kept in memory; `delete` is destructive, so it waits
for an approval), `secret` (whether NOTES_TOKEN arrived), `auth`
(whether an HTTP request's Authorization header is NOTES_EXPECT), `big` (a result of N bytes),
`sleep` (hangs for N seconds), `wait` (holds the call open until a line is written to the named
pipe it is given: a test releases it when it is ready, no clock involved), `crash` (the process
exits at once), `boom` (raises: an error result), `refuse` (a JSON-RPC error instead of a
result), `image` (a tiny PNG), `data` (structured content), `grow` (adds a tool and says the
list changed). Each call is appended to the file in NOTES_CALLS, when set, so a test sees
exactly what reached the server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import time
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import ImageContent, TextContent, ToolAnnotations

server = MCPServer("notes")
NOTES: list[str] = []
# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _record(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("NOTES_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(
                json.dumps({"tool": tool, "arguments": arguments, "pid": os.getpid()}) + "\n"
            )


@server.tool(annotations=ToolAnnotations(destructive_hint=False, read_only_hint=False))
def add(text: str) -> str:
    """Add a note."""
    _record("add", {"text": text})
    NOTES.append(text)
    return f"added note {len(NOTES)}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
def delete(text: str) -> str:
    """Delete every note holding `text` (destructive: it waits for an approval)."""
    _record("delete", {"text": text})
    kept = [note for note in NOTES if text not in note]
    gone = len(NOTES) - len(kept)
    NOTES[:] = kept
    return f"deleted {gone} note(s) holding {text!r}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search(query: str) -> str:
    """Search the notes for a word."""
    _record("search", {"query": query})
    found = [note for note in NOTES if query.lower() in note.lower()]
    return "\n".join(found) or "no notes match"


@server.tool()
def secret() -> str:
    """Say whether the token arrived (never its value)."""
    _record("secret", {})
    return "token present" if os.environ.get("NOTES_TOKEN") else "token missing"


@server.tool()
def auth(ctx: Context) -> str:
    """Say whether the request carried the expected Authorization header (never its value)."""
    _record("auth", {})
    expected = os.environ.get("NOTES_EXPECT", "")
    got = (ctx.headers or {}).get("authorization", "")
    return "authorized" if expected and got == expected else "not authorized"


@server.tool()
def big(size: int) -> str:
    """Return `size` bytes of text."""
    _record("big", {"size": size})
    return ("HEAD" + "x" * max(size - 8, 0) + "TAIL")[:size]


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    _record("sleep", {"seconds": seconds})
    await asyncio.sleep(seconds)
    return "slept"


def _read_line(path: str) -> str:
    with open(path, encoding="utf-8") as pipe:  # a FIFO: blocks until a writer opens it
        return pipe.readline().strip()


@server.tool()
async def wait(path: str) -> str:
    """Hold the call open until a line arrives on the named pipe at `path`, then answer it."""
    _record("wait", {"path": path})
    return f"released: {await asyncio.to_thread(_read_line, path)}"


@server.tool()
def crash() -> str:
    """Exit the process at once, mid-call."""
    _record("crash", {})
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def boom() -> str:
    """Fail."""
    _record("boom", {})
    raise ValueError("the notes shelf is on fire")


@server.tool()
def refuse() -> str:
    """Answer with a protocol error instead of a result."""
    _record("refuse", {})
    raise MCPError(code=-32001, message="refused by the shelf's policy")


@server.tool()
def image() -> list[ImageContent | TextContent]:
    """A tiny picture and its caption."""
    _record("image", {})
    return [
        ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        TextContent(type="text", text="a transparent pixel"),
    ]


@server.tool()
def data(word: str) -> dict[str, Any]:
    """Structured content about a word."""
    _record("data", {"word": word})
    return {"word": word, "length": len(word), "at": time.strftime("%Y")}


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named `extra` and tell the client the list changed."""
    _record("grow", {})
    server.add_tool(lambda: "extra!", name="extra", description="An added tool.")
    await ctx.notify_tools_changed()  # the 2026 wire: subscriptions/listen
    await ctx.session.send_tool_list_changed()  # earlier wires: a notification
    return "grown"


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
