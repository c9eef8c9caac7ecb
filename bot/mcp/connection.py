"""`ServerConnection`: one MCP server kept connected, its tools listed, its calls bounded.

A supervisor task owns the SDK's `Client` (its context must be entered and left in one task):
it connects, lists the tools, then waits for news. A call that finds the connection gone (a
crashed stdio child, an HTTP server that went away) reports it, and the supervisor reconnects
after a backoff (0.5 s, doubling to 30 s); a server that says its tools changed is listed again
(at most once per RELIST_SECONDS, however often it says so). The last good tool list outlives a
restart, so what the model is offered stays the same bytes. A listing past the server's bounds
(`max_tools`, `max_schema_bytes`, `max_list_bytes`), at start or later, refuses that server: its
tools are dropped, it is stopped and not started again, and the host goes on without it.

Every call waits at most `timeout_seconds` in all (for a restart, then for the answer) and runs
in the calling task, so the turn's cancellation cancels it. Whatever goes wrong becomes a
`ToolCallFailed` with a short reason for the model: nothing a server does crashes the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, cast

import httpx2
import structlog
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ServerNotification, Tool, ToolListChangedNotification
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from bot.errors import ServerRefused, ToolCallFailed
from bot.mcp.settings import SEPARATOR, McpServerSettings
from bot.prompt.fence import one_line

log = structlog.get_logger(__name__)

# The names the model API accepts for a tool.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DESCRIPTION_MAX_CHARS = 4000
STDERR_TAIL_BYTES = 600
# Starting a server (a child's interpreter, its imports) and listing its tools may take longer
# than one call is allowed: connecting waits at least this long.
CONNECT_MIN_SECONDS = 10.0
# Reconnecting a lost server waits this long, doubling up to RESTART_MAX (and starts over after
# a connection that lasted longer than that).
RESTART_FIRST = 0.5
RESTART_MAX = 30.0
# A server that says its tools changed is listed again at most this often (a flood of notices
# would otherwise keep the host listing): a change shows within this long.
RELIST_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool a server lists, as the host offers it (`name` is `<server>__<tool>`).

    The annotations are the server's hints (MCP `readOnlyHint`, `destructiveHint`, ...): None
    when it gave none. They are kept for the approvals that need them."""

    server: str
    tool: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    schema_bytes: int = 0  # its input schema as canonical JSON (UTF-8)

    @property
    def size(self) -> int:
        """About what its definition adds to every request that offers it, in bytes."""
        return len(self.name) + len(self.description.encode()) + self.schema_bytes


def tool_info(server: str, tool: Tool) -> ToolInfo | None:
    """The host's view of a listed tool; None when its name cannot be offered to the model."""
    name = f"{server}{SEPARATOR}{tool.name}"
    if not TOOL_NAME.match(name):
        return None
    hints = tool.annotations
    # Canonical JSON: the same listing gives the same bytes, whatever order the server used.
    canonical = json.dumps(tool.input_schema, sort_keys=True, ensure_ascii=False)
    schema = json.loads(canonical)
    return ToolInfo(
        server=server,
        tool=tool.name,
        name=name,
        description=(tool.description or tool.title or tool.name)[:DESCRIPTION_MAX_CHARS],
        input_schema=schema,
        read_only=hints.read_only_hint if hints else None,
        destructive=hints.destructive_hint if hints else None,
        idempotent=hints.idempotent_hint if hints else None,
        open_world=hints.open_world_hint if hints else None,
        schema_bytes=len(canonical.encode()),
    )


def check_bounds(settings: McpServerSettings, infos: Sequence[ToolInfo]) -> None:
    """Raise ServerRefused when a listing is past the server's bounds (its count is checked
    while it is fetched)."""
    name = settings.name
    for info in infos:
        if info.schema_bytes > settings.max_schema_bytes:
            raise ServerRefused(
                f"refused: its tool {info.tool!r} has an input schema of {info.schema_bytes} "
                f"bytes, more than max_schema_bytes = {settings.max_schema_bytes}. Fix: raise "
                f"max_schema_bytes of MCP server {name!r}, or leave that tool out of the server"
            )
    total = sum(info.size for info in infos)
    if total > settings.max_list_bytes:
        raise ServerRefused(
            f"refused: its tool definitions take {total} bytes, more than max_list_bytes = "
            f"{settings.max_list_bytes}. Fix: raise max_list_bytes of MCP server {name!r}, or "
            "have it offer fewer or smaller tools"
        )


def too_many(settings: McpServerSettings, count: int) -> ServerRefused:
    return ServerRefused(
        f"refused: it lists {count} tools (or more), more than max_tools = {settings.max_tools}. "
        f"Fix: raise max_tools of MCP server {settings.name!r}, or have it offer fewer tools"
    )


class ServerConnection:
    """One configured server: its supervisor, its listed tools, and `call`."""

    def __init__(
        self,
        settings: McpServerSettings,
        secrets: Mapping[str, str],
        *,
        on_tools: Callable[[], None] = lambda: None,
    ) -> None:
        """`secrets`: the values of the variables `env` and `headers_env` name (those set)."""
        self.settings = settings
        self.name = settings.name
        self.tools: tuple[ToolInfo, ...] = ()
        self.problem: str | None = "not started"
        self._secrets = secrets
        self._on_tools = on_tools
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._tried = asyncio.Event()  # the first connection attempt ended (either way)
        self._news: asyncio.Queue[str] = asyncio.Queue()  # "changed" (once at a time), "lost"
        self._change_noted = False
        self.refused = False  # past its bounds: not used until the host restarts
        self._task: asyncio.Task[None] | None = None
        self._errlog: TextIO | None = None

    @property
    def secret_values(self) -> tuple[str, ...]:
        """The values this server is handed (its env, its headers): never to be repeated."""
        return tuple(self._secrets[n] for n in self.settings.secret_names() if n in self._secrets)

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def _connect_timeout(self) -> float:
        return max(self.settings.timeout_seconds, CONNECT_MIN_SECONDS)

    async def start(self) -> None:
        """Start the supervisor and wait for its first attempt (connecting, listing the tools)."""
        # The child writes to it (appending), `stderr_tail` reads it; closed by aclose.
        errlog = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._errlog = cast(TextIO, errlog)
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        with contextlib.suppress(TimeoutError):
            # A little past the attempt's own timeout, so a hung start reports that timeout.
            async with asyncio.timeout(self._connect_timeout + 2):
                await self._tried.wait()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(10):
                    await task
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None

    async def _supervise(self) -> None:
        delay = RESTART_FIRST
        while True:
            began = time.monotonic()
            try:
                async with self._connected() as client:
                    self._news = asyncio.Queue()  # news of an earlier connection is stale
                    self._change_noted = False
                    await self._list(client)
                    self._client, self.problem = client, None
                    self._up.set()
                    self._tried.set()
                    log.info("mcp_server_up", server=self.name, tools=len(self.tools))
                    await self._serve(client)
            except Exception as exc:  # a server's failure never ends the host (nor this loop)
                refused = _refusal(exc)
                if refused is not None:
                    self._refuse(refused)
                    return
                self.problem = self._reason(exc)
                log.warning("mcp_server_failed", server=self.name, error=self.problem)
            finally:
                self._client = None
                self._up.clear()
                self._tried.set()
            if time.monotonic() - began > RESTART_MAX:
                delay = RESTART_FIRST  # it ran a good while: start the backoff over
            log.info("mcp_server_restart", server=self.name, in_seconds=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX)

    def _refuse(self, refused: ServerRefused) -> None:
        """A server past its bounds is dropped until the host restarts: its tools are offered no
        more, and it is not started again (it would list the same)."""
        self.problem, self.refused = str(refused), True
        log.error("mcp_server_refused", server=self.name, error=self.problem)
        if self.tools:
            self.tools = ()
            self._on_tools()

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        timeout = self._connect_timeout
        if self._errlog is not None:
            self._errlog.truncate(0)  # only this run's error output explains its failure
        async with contextlib.AsyncExitStack() as stack:
            if self.settings.command is not None:
                command, *args = self.settings.command
                params = StdioServerParameters(
                    command=command,
                    args=args,
                    env={n: self._secrets[n] for n in self.settings.env if n in self._secrets},
                    encoding_error_handler="replace",
                )
                assert self._errlog is not None, "start() opens it"
                transport = stdio_client(params, errlog=self._errlog)
            else:
                assert self.settings.url is not None
                headers = {
                    header: self._secrets[name]
                    for header, name in self.settings.headers_env.items()
                    if name in self._secrets
                }
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False)
                )
                transport = streamable_http_client(self.settings.url, http_client=http)
            client = Client(
                transport,
                read_timeout_seconds=timeout,
                message_handler=self._on_message,
                cache=None,
            )
            async with asyncio.timeout(timeout):
                await stack.enter_async_context(client)
            yield client

    async def _serve(self, client: Client) -> None:
        """Until the connection is lost: re-list the tools when the server says they changed, at
        most once per RELIST_SECONDS however often it says so (notices in between are one)."""
        watcher = None
        tools = client.server_capabilities.tools
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS and tools and tools.list_changed:
            watcher = asyncio.create_task(self._listen(client))
        listed_at = time.monotonic()
        try:
            while await self._news.get() != "lost":
                await asyncio.sleep(max(listed_at + RELIST_SECONDS - time.monotonic(), 0))
                self._change_noted = False  # a notice from now on asks for another listing
                try:
                    await self._list(client)
                except ServerRefused:
                    raise
                except Exception as exc:  # a failed re-list keeps the tools already listed
                    log.warning("mcp_list_failed", server=self.name, error=self._reason(exc))
                listed_at = time.monotonic()
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher

    def _note_change(self) -> None:
        """The server says its tools changed: one listing is due (however many notices)."""
        if not self._change_noted:
            self._change_noted = True
            self._news.put_nowait("changed")

    async def _listen(self, client: Client) -> None:
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._note_change()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ServerNotification) and isinstance(
            message, ToolListChangedNotification
        ):
            self._note_change()

    async def _list(self, client: Client) -> None:
        listed = await self._fetch(client)
        infos = []
        for tool in listed:
            info = tool_info(self.name, tool)
            if info is None:
                log.warning("mcp_tool_skipped", server=self.name, tool=one_line(tool.name, 100))
            else:
                infos.append(info)
        check_bounds(self.settings, infos)
        tools = tuple(sorted({info.name: info for info in infos}.values(), key=lambda t: t.name))
        changed = tools != self.tools
        self.tools = tools
        if changed:
            log.info("mcp_tools_listed", server=self.name, tools=[t.name for t in tools])
            self._on_tools()

    async def _fetch(self, client: Client) -> list[Tool]:
        """Every page of the listing; ServerRefused as soon as it passes `max_tools`."""
        listed: list[Tool] = []
        cursor: str | None = None
        async with asyncio.timeout(self._connect_timeout):
            for _ in range(100):  # a server that pages forever cannot hang the host
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                listed += page.tools
                if len(listed) > self.settings.max_tools:
                    raise too_many(self.settings, len(listed))
                cursor = page.next_cursor
                if cursor is None:
                    break
        return listed

    # --- calls ----------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """Call `tool` (the server's own name); raises ToolCallFailed with a short reason."""
        timeout = self.settings.timeout_seconds
        if self.refused:
            raise ToolCallFailed(f"the server is not used ({self.problem})")
        try:
            async with asyncio.timeout(timeout):
                await self._up.wait()
                client = self._client
                if client is None:
                    problem = self.problem or "restarting"
                    raise ToolCallFailed(f"the server is not connected ({problem})")
                return await client.call_tool(tool, dict(arguments))
        except TimeoutError:
            if not self._up.is_set():
                raise ToolCallFailed(
                    f"the server is not available ({self.problem or 'still starting'}); "
                    f"waited {timeout:g} s"
                ) from None
            raise ToolCallFailed(f"no answer within {timeout:g} s (timeout_seconds)") from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._lost()
                raise ToolCallFailed(
                    "the server's connection closed during the call (it may have crashed); "
                    "it is being restarted"
                ) from None
            raise ToolCallFailed(
                f"the server refused the call: {one_line(exc.message, 300)}"
            ) from None
        except ValidationError:
            raise ToolCallFailed("the server's answer was not a valid MCP result") from None
        except (ToolCallFailed, asyncio.CancelledError):
            raise
        except Exception as exc:  # transport errors: the connection is no longer usable
            self._lost()
            raise ToolCallFailed(f"the call failed ({self._reason(exc)})") from None

    def _lost(self) -> None:
        if self._up.is_set():
            self._up.clear()
            self._news.put_nowait("lost")

    # --- diagnostics ----------------------------------------------------------------------------

    def _reason(self, exc: BaseException) -> str:
        """A short, one-line reason (group exceptions unwrapped), with the tail of a stdio
        server's own error output when it left some."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, TimeoutError):
            reason = f"no valid answer within {self._connect_timeout:g} s while connecting"
        elif isinstance(exc, FileNotFoundError | PermissionError):
            program = self.settings.command[0] if self.settings.command else ""
            reason = f"cannot start {program!r}: {exc.strerror}"
        elif isinstance(exc, MCPError):
            reason = exc.message
        else:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        tail = self.stderr_tail()
        return one_line(f"{reason}{f' (stderr: {tail})' if tail else ''}", 500)

    def stderr_tail(self) -> str:
        """The last lines a stdio server wrote to its error output (empty for none)."""
        errlog = self._errlog
        if errlog is None or errlog.closed:
            return ""
        errlog.flush()
        size = errlog.seek(0, 2)
        errlog.seek(max(size - STDERR_TAIL_BYTES, 0))
        return " | ".join(line.strip() for line in errlog.read().splitlines() if line.strip())


def _refusal(exc: BaseException) -> ServerRefused | None:
    """The ServerRefused behind `exc`, also from inside the SDK's exception groups."""
    if isinstance(exc, ServerRefused):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _refusal(inner)) is not None:
                return found
    return None
