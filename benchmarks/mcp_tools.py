"""Benchmark: what MCP tools cost the host: one call's overhead, and the prompt cache with a server.

Run: `.venv/bin/python -m benchmarks.mcp_tools [--calls N] [--warmup N] [--turns N]
                                               [--part overhead|cost|both]`

Overhead: the notes server of the tests (`tests/mcp_servers/notes.py`, the official SDK) over
stdio (a child process) and streamable HTTP (its own process on loopback). Each call of its
`search` tool is timed twice in turn: straight through the SDK's `Client.call_tool` (the server's
own time, transport included) and through the host's path (`McpTool`: the link's checks, the
timeout, the SDK call, rendering, bounding and fencing the result). The host's overhead is the
difference of the two distributions' percentiles (p50, p99), in milliseconds.

Cost: the 40-turn group scenario of `benchmarks.cache` (memory on), played once as is and once
with the notes server configured and its `add` and `search` tools allowed on the group by a
surface rule (the built-in tools listed too, so the rule takes nothing away). The tool
definitions join the cached prefix: the figures are weighted tokens per turn (cache reads at a
tenth) and the cache share, mean over turns 10-40, next to the run without the server (the floor
with memory) and the targets (SPEC §12).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time
from collections.abc import Sequence
from typing import Any, TextIO

import structlog
from mcp import Client, StdioServerParameters, stdio_client

from benchmarks import cache
from bot.mcp.hub import McpHub, McpTool
from bot.mcp.settings import McpServerSettings, McpSettings

NOTES = cache.NOTES
RULE = (
    '\n[[surfaces]]\nplatform = "telegram"\nkind = "group"\n'
    'tools = ["notes__add", "notes__search", "memory_recall", "load_skill", "read_attachment"]\n'
)


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


async def _timed(call: Any) -> float:
    began = time.perf_counter()
    await call
    return (time.perf_counter() - began) * 1000


async def overhead(
    transport: str, target: Any, settings: McpServerSettings, calls: int, warmup: int
) -> dict[str, Any]:
    hub = McpHub(McpSettings(servers=[settings]), {})
    await hub.start()
    try:
        [tool] = [t for t in hub.tools() if t.spec.name == "notes__search"]
        assert isinstance(tool, McpTool)
        async with Client(target, read_timeout_seconds=30) as client:
            raw, host = [], []
            for n in range(warmup + calls):
                sdk = await _timed(client.call_tool("search", {"query": "x"}))
                ours = await _timed(tool({"query": "x"}))
                if n >= warmup:
                    raw.append(sdk)
                    host.append(ours)
    finally:
        await hub.aclose()
    row = {"transport": transport, "calls": calls}
    for name, share in (("p50", 0.5), ("p99", 0.99)):
        sdk_ms, host_ms = percentile(raw, share), percentile(host, share)
        row[f"sdk_{name}_ms"] = round(sdk_ms, 3)
        row[f"host_{name}_ms"] = round(host_ms, 3)
        row[f"overhead_{name}_ms"] = round(host_ms - sdk_ms, 3)
    print(
        f"{transport:>5}: server (SDK) p50 {row['sdk_p50_ms']:.2f} ms, "
        f"p99 {row['sdk_p99_ms']:.2f} ms;"
        f" through the host p50 {row['host_p50_ms']:.2f} ms, p99 {row['host_p99_ms']:.2f} ms;"
        f" overhead p50 {row['overhead_p50_ms']:+.2f} ms, p99 {row['overhead_p99_ms']:+.2f} ms"
    )
    return row


def _devnull() -> TextIO:
    return open(os.devnull, "w", encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def overheads(calls: int, warmup: int) -> list[dict[str, Any]]:
    stdio = McpServerSettings(name="notes", command=NOTES)
    params = StdioServerParameters(command=NOTES[0], args=NOTES[1:])
    quiet = _devnull()  # the server's error output: nowhere
    try:
        rows = [await overhead("stdio", stdio_client(params, errlog=quiet), stdio, calls, warmup)]
    finally:
        quiet.close()
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        *NOTES,
        "--http",
        str(port),
        env=dict(os.environ),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        async with asyncio.timeout(30):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
        http = McpServerSettings(name="notes", url=url)
        rows.append(await overhead("http", url, http, calls, warmup))
    finally:
        process.terminate()
        await process.wait()
    return rows


async def cost(turns: int) -> list[dict[str, Any]]:
    data = json.loads(cache.DATA.read_text(encoding="utf-8"))
    if turns:
        data = {**data, "turns": data["turns"][:turns]}
    server = f'\n[[mcp.servers]]\nname = "notes"\ncommand = {json.dumps(NOTES)}\n'
    summaries = []
    for label, extra in (
        ("memory on, no MCP server (the floor)", ""),
        ("memory on, notes MCP server allowed on the group", server + RULE),
    ):
        figures, fresh, ceiling = await cache.scenario(data, "none", True, extra)
        summaries.append(cache.report(label, figures, fresh, ceiling))
    floor, with_mcp = summaries
    print(
        f"\nwith the MCP server: weighted {with_mcp['mean_weighted']:.0f} tokens per turn "
        f"({with_mcp['mean_weighted'] - floor['mean_weighted']:+.0f} over the floor "
        f"{floor['mean_weighted']:.0f}; target <= {cache.TARGET_WEIGHTED}), share "
        f"{with_mcp['mean_share']:.3f} (floor {floor['mean_share']:.3f}; "
        f"target >= {cache.TARGET_SHARE})"
    )
    return summaries


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--turns", type=int, default=0, help="cost: only the first N turns")
    parser.add_argument("--part", choices=["overhead", "cost", "both"], default="both")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    results: dict[str, Any] = {}
    if args.part in ("overhead", "both"):
        print("== one tool round trip: the server's own time and the host's overhead ==")
        results["overhead"] = await overheads(args.calls, args.warmup)
    if args.part in ("cost", "both"):
        results["cost"] = await cost(args.turns)
    print("\n" + json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
