"""`McpHub`: every configured MCP server, and their tools as the host's `Tool`s.

Tools reach the model as `<server>__<tool>`, sorted by name, each definition canonical JSON, so
the same allowed set is the same bytes on every surface and every turn. A call goes to its own
server only; its result comes back fenced and bounded (`bot.mcp.results`), and anything that goes
wrong (not started, hung, crashed, refused, garbage) becomes an error result with a short reason:
the turn goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from bot.errors import ToolError
from bot.mcp.link import CallFailed, ServerLink, ToolInfo
from bot.mcp.results import fenced, result_text
from bot.mcp.settings import McpSettings
from bot.ports.tools import ToolSpec

log = structlog.get_logger(__name__)


class McpTool:
    """One server tool as the host offers it: its spec, its hints, and the call."""

    def __init__(self, info: ToolInfo, link: ServerLink) -> None:
        self.info = info
        self.spec = ToolSpec(info.name, info.description, info.input_schema)
        self._link = link

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        info, limit = self.info, self._link.settings.max_output_bytes
        try:
            result = await self._link.call(info.tool, arguments)
        except CallFailed as exc:
            log.warning("mcp_call_failed", server=info.server, tool=info.name, reason=str(exc))
            raise ToolError(fenced(info.name, str(exc), limit, error=True)) from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(fenced(info.name, text or "no reason given", limit, error=True))
        return fenced(info.name, text, limit)


class McpHub:
    """The configured servers: started together, stopped together, their tools in one list."""

    def __init__(self, settings: McpSettings, secrets: Mapping[str, str]) -> None:
        """`secrets`: environment values by name (those `env` and `headers_env` name)."""
        self.links = [
            ServerLink(server, secrets, on_tools=self._changed) for server in settings.servers
        ]
        self._tools: tuple[McpTool, ...] = ()

    @property
    def servers(self) -> frozenset[str]:
        return frozenset(link.name for link in self.links)

    async def start(self) -> None:
        """Start every server; each waits at most its timeout for its first connection. One that
        fails keeps being retried in the background; its tools appear once it lists them."""
        await asyncio.gather(*(link.start() for link in self.links))
        for link in self.links:
            if link.problem is not None:
                log.warning("mcp_server_unavailable", server=link.name, error=link.problem)

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self.links))

    def _changed(self) -> None:
        tools = [McpTool(info, link) for link in self.links for info in link.tools]
        self._tools = tuple(sorted(tools, key=lambda tool: tool.spec.name))

    def tools(self) -> Sequence[McpTool]:
        """Every listed tool of every server, sorted by name."""
        return self._tools

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools]
