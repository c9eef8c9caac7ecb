"""`McpHub`: every configured MCP server, and their tools as the host's `Tool`s.

Tools reach the model as `<server>__<tool>`, sorted by name, each definition canonical JSON, so
the same allowed set is the same bytes on every surface and every turn. Two servers' tools that
would share one such name are both left out (`clashes` says why): a name means one tool. A call
goes to its own server only; its result comes back fenced and bounded (`bot.mcp.results`), and
anything that goes wrong (not started, hung, crashed, refused, garbage) becomes an error result
with a short reason: the turn goes on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from mcp.types import ImageContent

from bot.attachments.images import prepare_image
from bot.errors import FileUnreadable, ToolCallFailed, ToolError
from bot.logs import redact_text
from bot.mcp.connection import ServerConnection, ToolInfo
from bot.mcp.results import fenced, images, result_text
from bot.mcp.settings import McpSettings
from bot.ports.tools import ToolImage, ToolOutput, ToolSpec

log = structlog.get_logger(__name__)

# Images of one result shown to the model (each downscaled like a shared photo); more are only
# described. Larger than this, an image is not even decoded.
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 20 * 1024 * 1024


class McpTool:
    """One server tool as the host offers it: its spec, its hints, and the call."""

    def __init__(self, info: ToolInfo, link: ServerConnection) -> None:
        self.info = info
        self.spec = ToolSpec(info.name, info.description, info.input_schema)
        self.approve = tuple(link.settings.approve)  # its server's globs (bot.tools.approvals)
        self._link = link

    async def __call__(self, arguments: Mapping[str, Any]) -> str | ToolOutput:
        info, limit = self.info, self._link.settings.max_output_bytes
        # What a server says may hold a secret the host gave it (its env, its headers) or any
        # other the host knows: redacted by value before it is bounded, so no cut hides one.
        secrets = self._link.secret_values
        try:
            result = await self._link.call(info.tool, arguments)
        except ToolCallFailed as exc:
            log.warning("mcp_call_failed", server=info.server, tool=info.name, reason=str(exc))
            reason = redact_text(str(exc), secrets)
            raise ToolError(fenced(info.name, reason, limit, error=True)) from None
        text = redact_text(result_text(result), secrets)
        if result.is_error:
            raise ToolError(fenced(info.name, text or "no reason given", limit, error=True))
        shown, notes = await _ready(images(result))
        text = "\n".join([text, *notes]) if notes else text
        body = fenced(info.name, text, limit)
        return ToolOutput(body, shown) if shown else body


def distinct(infos: Sequence[ToolInfo]) -> tuple[list[ToolInfo], dict[str, str]]:
    """The tools whose model name no other tool has, sorted by it, and for each name that two
    or more share, why none of them is offered: one name is one tool, or none."""
    named: dict[str, list[ToolInfo]] = {}
    for info in infos:
        named.setdefault(info.name, []).append(info)
    kept = [found[0] for _, found in sorted(named.items()) if len(found) == 1]
    return kept, {name: _clash(name, found) for name, found in named.items() if len(found) > 1}


def _clash(name: str, infos: Sequence[ToolInfo]) -> str:
    both = " and ".join(f"{info.server!r}'s {info.tool!r}" for info in infos)
    return (
        f"{name} would name {both}, so neither is offered. Fix: rename one of these servers "
        "(a server name ending in '_' meets a tool name starting with '_')"
    )


async def _ready(found: Sequence[ImageContent]) -> tuple[tuple[ToolImage, ...], list[str]]:
    """The images to show (downscaled within the API's limits, off the event loop) and a line
    for each one that is not shown, saying why."""
    shown: list[ToolImage] = []
    notes: list[str] = []
    for number, block in enumerate(found[:MAX_IMAGES], start=1):
        try:
            data = base64.b64decode(block.data, validate=True)
            if len(data) > MAX_IMAGE_BYTES:
                raise FileUnreadable(f"larger than {MAX_IMAGE_BYTES} bytes")
            ready = await asyncio.to_thread(prepare_image, data)
        except (binascii.Error, ValueError):
            notes.append(f"[image {number} not shown: its data is not valid base64]")
            continue
        except FileUnreadable as exc:
            notes.append(f"[image {number} not shown: {exc}]")
            continue
        shown.append(ToolImage(ready.media_type, base64.b64encode(ready.data).decode("ascii")))
    if len(found) > MAX_IMAGES:
        notes.append(f"[{len(found) - MAX_IMAGES} more image(s) not shown]")
    if shown:
        notes.append(f"[{len(shown)} image(s) shown with this result, only this once]")
    return tuple(shown), notes


class McpHub:
    """The configured servers: started together, stopped together, their tools in one list."""

    def __init__(self, settings: McpSettings, secrets: Mapping[str, str]) -> None:
        """`secrets`: environment values by name (those `env` and `headers_env` name)."""
        self.links = [
            ServerConnection(server, secrets, on_tools=self._changed) for server in settings.servers
        ]
        self._tools: tuple[McpTool, ...] = ()
        # Names the model would see for tools of two servers (`dup_` + `x` and `dup` + `_x` are
        # both `dup___x`): each such tool is left out, and why is said here and in the log.
        self.clashes: dict[str, str] = {}

    @property
    def servers(self) -> frozenset[str]:
        return frozenset(link.name for link in self.links)

    async def start(self) -> None:
        """Start every server; each waits at most its timeout for its first connection. One that
        fails keeps being retried in the background; its tools appear once it lists them."""
        await asyncio.gather(*(link.start() for link in self.links))
        for link in self.links:
            if link.problem is not None and not link.refused:  # a refusal said so already
                log.warning("mcp_server_unavailable", server=link.name, error=link.problem)

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self.links))

    def _changed(self) -> None:
        links = {link.name: link for link in self.links}
        kept, clashes = distinct([info for link in self.links for info in link.tools])
        for name in clashes.keys() - self.clashes.keys():
            log.warning("mcp_tool_name_clash", tool=name, error=clashes[name])
        self.clashes = clashes
        self._tools = tuple(McpTool(info, links[info.server]) for info in kept)

    def tools(self) -> Sequence[McpTool]:
        """Every listed tool of every server, sorted by name."""
        return self._tools

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools]
