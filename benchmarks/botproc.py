"""The bot under benchmark, as a process of its own: the whole App, the model as the driver says.

    python benchmarks/botproc.py CONFIG instant|server    (tokens from the environment)

Started by the host benchmarks (`benchmarks.overhead.BotProcess`) so that the CPU the bot spends
per turn can be read off its own process, apart from the fake servers that drive it. Run as a
script, not a module: the bot comes from the first tree on PYTHONPATH, which may be a baseline
commit's (`benchmarks.compare`), while this file is the current checkout's. It prints `ready` on
standard output once every channel is up, and stops on SIGTERM. `server` (the host benchmarks'
default) calls the model through the anthropic SDK at the config's base URL; `instant` answers
with the in-process stand-in. With BENCH_PROFILE=FILE in the environment the bot runs under
cProfile (CPU time, every thread's, from the App's start on: the bot's modules are imported
before) and writes its stats to FILE when it stops (read them with `python -m pstats FILE`), e.g.
`BENCH_PROFILE=/tmp/tg.prof python -m benchmarks.host_telegram --bot-tree TREE ...`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path


async def serve(config_path: str, model: str) -> None:
    import structlog

    from benchmarks.overhead import InstantModel  # the tree's own, matching its ports
    from bot.cli.compose import App
    from bot.cli.settings import load_config

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    config = load_config(Path(config_path), env=dict(os.environ))
    async with App(config, model=InstantModel() if model == "instant" else None):
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    if profile := os.environ.get("BENCH_PROFILE"):  # cProfile the bot; stats written at stop
        import cProfile
        import time

        import bot.cli.compose  # noqa: F401  imported first: the stats are the bot's work, not imports

        with cProfile.Profile(time.process_time) as profiler:  # CPU, not time spent waiting
            asyncio.run(serve(sys.argv[1], sys.argv[2]))
        profiler.dump_stats(profile)
    else:
        asyncio.run(serve(sys.argv[1], sys.argv[2]))
