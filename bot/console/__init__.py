"""The operator console (SPEC §18): server-rendered pages under `/console` on the host's HTTP
port, behind a login. `bot.console.app.build_console` makes the aiohttp application the
composition root mounts; this package imports no web framework until that is called."""
