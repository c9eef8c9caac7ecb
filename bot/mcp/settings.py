"""`[[mcp.servers]]`: which MCP servers the host connects to, and how. Plain data, no SDK.

Exactly one of `command` (stdio: a child process the host starts and stops) or `url` (streamable
HTTP). `env` names environment variables passed to a stdio server and `headers_env` maps HTTP
header names to the environment variables holding their values: the values are secrets, read from
the environment only (never from the file) and redacted everywhere by value.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from bot.config import Section
from bot.errors import ConfigError
from bot.policy.surfaces import TOOL_GLOB

SERVER_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"
SEPARATOR = "__"  # a tool reaches the model as <server>__<tool>
# What one server may list: every tool rides in every request of the surfaces offered it, so a
# server listing thousands of tools or megabytes of schema would crowd out (or fail) every turn.
MAX_TOOLS = 128
MAX_SCHEMA_BYTES = 64 * 1024  # one tool's input schema, as canonical JSON
MAX_LIST_BYTES = 256 * 1024  # the whole list: names, descriptions and schemas


class McpServerSettings(Section):
    name: Annotated[str, Field(pattern=SERVER_NAME)]
    command: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    url: Annotated[str, Field(pattern=r"^https?://[^\s]+$", max_length=2000)] | None = None
    env: list[Annotated[str, Field(pattern=ENV_NAME)]] = Field(default_factory=list)
    headers_env: dict[
        Annotated[str, Field(pattern=HEADER_NAME)], Annotated[str, Field(pattern=ENV_NAME)]
    ] = Field(default_factory=dict)
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # Below the runtime's own bound on any tool result (256 KB), so the fenced result is kept whole.
    max_output_bytes: Annotated[int, Field(ge=1024, le=200 * 1024)] = 65536
    approve: list[Annotated[str, Field(pattern=TOOL_GLOB)]] = Field(default_factory=list)
    max_tools: Annotated[int, Field(ge=1, le=1000)] = MAX_TOOLS
    max_schema_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = MAX_SCHEMA_BYTES
    max_list_bytes: Annotated[int, Field(ge=1024, le=4 * 1024 * 1024)] = MAX_LIST_BYTES

    @field_validator("name")
    @classmethod
    def _no_separator(cls, value: str) -> str:
        if SEPARATOR in value:
            raise ValueError(
                f"a server name may not hold {SEPARATOR!r} (the model sees <server>__<tool>)"
            )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "set exactly one of command (a stdio server the host starts, e.g. "
                '["python", "-m", "notes_mcp"]) or url (a streamable HTTP server)'
            )
        if self.url is not None and self.env:
            raise ValueError(
                "env passes variables to a child process, and a url server is not one; send "
                "credentials to it with headers_env instead"
            )
        if self.command is not None and self.headers_env:
            raise ValueError(
                "headers_env sets HTTP headers, and a command server speaks over stdio; pass its "
                "credentials with env instead"
            )
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secret_names(self) -> tuple[str, ...]:
        return (*self.env, *self.headers_env.values())


class McpSettings(Section):
    servers: list[McpServerSettings] = Field(default_factory=list)

    def check(self) -> None:
        seen: set[str] = set()
        for index, server in enumerate(self.servers):
            if server.name in seen:
                raise ConfigError(
                    f"mcp.servers[{index}].name = {server.name!r}: another server has this name. "
                    "Fix: give each [[mcp.servers]] entry its own name (its tools are named "
                    "<name>__<tool>)."
                )
            seen.add(server.name)

    def secret_names(self) -> tuple[str, ...]:
        return tuple(name for server in self.servers for name in server.secret_names())
