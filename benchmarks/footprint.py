"""Footprint benchmark (SPEC §12): start times of every command and the idle memory of `bot run`.

    python -m benchmarks.footprint [--runs N] [--idle SECONDS] [--commands NAME,...]

Start time: the `bot` console script with `--help`, and `bot COMMAND --help` for every command
(or those `--commands` names), each run many times (p50, max; SPEC: each within 150 ms);
heavy SDKs must not load.
First answer: `echo hi | bot chat` against the fake Messages API (which answers at once), from
start to the answer's first line on stdout, beside what `import anthropic` alone takes in a fresh
interpreter (SPEC: within 300 ms more). Idle memory: `bot run` with Slack (Socket Mode), Telegram
(polling) and a cron job enabled, against
the fake Slack, fake Telegram and fake Anthropic servers on loopback; resident set size read from
/proc after the host reports healthy and has idled for a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from bot.cli import COMMANDS
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

RUNS = 20
IDLE_SECONDS = 5.0


def _bot_command() -> list[str]:
    script = shutil.which("bot", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "bot.cli"]


# As an installed bot runs: with compiled bytecode (pip compiles it at install; a checkout run
# with PYTHONDONTWRITEBYTECODE would compile every module at every start instead).
# The cache is kept between runs, as an installation's bytecode is.
INSTALLED = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": str(Path(tempfile.gettempdir(), "bot-footprint-pycache")),
}


def start_time(runs: int = RUNS, *args: str) -> list[float]:
    command = [*_bot_command(), *args, "--help"]
    return _timed(command, runs)


def _timed(command: list[str], runs: int) -> list[float]:
    subprocess.run(command, capture_output=True, check=True, env=INSTALLED)  # warm caches once
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=INSTALLED)
        timings.append(time.perf_counter() - started)
    return timings


def _shown(timings: list[float]) -> str:
    return f"p50 {statistics.median(timings) * 1000:4.0f} ms, max {max(timings) * 1000:4.0f} ms"


def sdk_import(runs: int) -> list[float]:
    """`import anthropic` alone, in a fresh interpreter (minus the interpreter's own start)."""
    bare = _timed([sys.executable, "-c", "pass"], runs)
    loaded = _timed([sys.executable, "-c", "import anthropic"], runs)
    return [max(0.0, t - statistics.median(bare)) for t in loaded]


async def first_answer(runs: int) -> list[float]:
    """`echo hi | bot chat` from start to the first line of its answer on stdout."""
    async with FakeAnthropic() as model:
        folder = Path(tempfile.mkdtemp(prefix="bot-footprint-"))
        (folder / "IDENTITY.md").write_text("# Identity\n\nYou are a benchmark bot.\n")
        config = folder / "bot.toml"
        config.write_text('[agent]\nidentity_path = "IDENTITY.md"\n[store]\npath = "data/b.db"\n')
        key, url = "sk-ant-bench-0123456789", model.base_url
        env = dict(INSTALLED, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=url)
        try:
            return [await _one_chat(config, env) for _ in range(runs + 1)][1:]  # the first warms
        finally:
            shutil.rmtree(folder, ignore_errors=True)


async def _one_chat(config: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *_bot_command(),
        "--config",
        str(config),
        "chat",
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b"hi\n")
    process.stdin.close()
    line = await process.stdout.readline()
    answered = time.perf_counter() - started
    await process.communicate()
    if not line.strip() or process.returncode != 0:
        raise RuntimeError(f"bot chat gave no answer (exit {process.returncode})")
    return answered


def _config(folder: Path, slack: FakeSlack, tg: FakeTelegram, port: int) -> Path:
    (folder / "IDENTITY.md").write_text("# Identity\n\nYou are a benchmark bot.\n")
    path = folder / "bot.toml"
    path.write_text(
        f"""
[agent]
identity_path = "IDENTITY.md"

[store]
path = "data/bot.sqlite3"

[slack]
enabled = true
api_url = "{slack.api_url}"

[telegram]
enabled = true
api_url = "{tg.base_url}"

[http]
port = {port}

[[cron.jobs]]
name = "hourly"
schedule = "0 * * * *"
prompt = "Say hello."
"""
    )
    return path


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def idle_memory(idle_seconds: float = IDLE_SECONDS) -> int:
    async with FakeAnthropic() as model, FakeSlack() as slack, FakeTelegram() as tg:
        folder = Path(tempfile.mkdtemp(prefix="bot-footprint-"))
        port = _free_port()
        config = _config(folder, slack, tg, port)
        env = dict(
            INSTALLED,
            ANTHROPIC_API_KEY="sk-ant-bench-0123456789",
            ANTHROPIC_BASE_URL=model.base_url,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            TELEGRAM_BOT_TOKEN=tg.token,
        )
        process = await asyncio.create_subprocess_exec(
            *_bot_command(),
            "--config",
            str(config),
            "run",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await _wait_healthy(port)
            await asyncio.sleep(idle_seconds)
            return _rss_kib(process.pid)
        finally:
            process.terminate()
            await process.wait()
            shutil.rmtree(folder, ignore_errors=True)


async def _wait_healthy(port: int) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as reply:
                    if reply.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("bot run did not become healthy within 30 s")


def _commands(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(COMMANDS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"no such command: {', '.join(unknown) or value!r}. "
            f"Fix: name some of {', '.join(COMMANDS)}"
        )
    return names


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="`bot --help` runs timed")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS, help="seconds idle before RSS")
    parser.add_argument(
        "--commands",
        type=_commands,
        default=list(COMMANDS),
        help="the commands whose `--help` is timed, comma-separated (default: every one)",
    )
    args = parser.parse_args(argv)
    print(f"bot --help start time over {args.runs} runs: {_shown(start_time(args.runs))}")
    for name in args.commands:
        print(f"  bot {name + ' --help':<18} {_shown(start_time(args.runs, name))}")
    sdk = sdk_import(args.runs)
    chat = asyncio.run(first_answer(args.runs))
    print(f"import anthropic alone: {_shown(sdk)}")
    beyond = (statistics.median(chat) - statistics.median(sdk)) * 1000
    print(f"echo hi | bot chat, first answer: {_shown(chat)}; {beyond:.0f} ms beyond the SDK")
    rss = asyncio.run(idle_memory(args.idle))
    label = f"bot run idle RSS (Slack + Telegram + cron, after {args.idle:g} s)"
    print(f"{label}: {rss / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
