"""Small MCP servers written with the official `mcp` SDK, run by the tests over stdio and
streamable HTTP (loopback): the real protocol, the production client path."""
