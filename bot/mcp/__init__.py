"""Tools from MCP servers (SPEC §14): the only package that imports the `mcp` SDK.

`settings` is plain data (`[[mcp.servers]]`, no SDK); `results` renders a tool result as the
untrusted, bounded text the model reads; `link` keeps one server connected (started, listed,
restarted with backoff, re-listed when it says its tools changed); `hub` holds every server and
offers their tools as the host's `Tool`s, named `<server>__<tool>`. Nothing is imported here, so
reading the settings loads no SDK.
"""
