"""What the host-overhead benchmarks share: the scripted answer, the model choice, the figures.

By default (`--model server`) the bot calls the model the way a user's does: the anthropic SDK
over HTTP to the fake Messages API (which answers at once), streaming as configured by default.
`--model instant` is an extra figure, never the default one: a `ModelRuntime` that assembles the
real request and answers it without any I/O, labelled as such in every line it prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import signal
import statistics
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg

from bot.ports.model import AssembledRequest, TurnOutcome, TurnPlan
from bot.ports.records import Usage
from bot.turns import HistoryEntry, TextBlock
from tests import postgres

ANSWER = textwrap.dedent(
    """\
    **Answer {n}.** Here is what I found 🚀:

    - the deploy failed on the *migration* step
    - the fix is in review (`db/migrate.py`, line 42)

    See [the run](https://ci.example/runs/{n}) & tell me if you want details.
    """
)
QUESTION = re.compile(r"question (\d+)")


MODELS = {
    "server": "anthropic SDK over HTTP to the fake Messages API, streaming (the real path)",
    "instant": "INSTANT in-process stand-in (no SDK, no HTTP): not the real path",
}


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="server",
        help="server (default): the anthropic SDK to the fake Messages API; "
        "instant: an in-process stand-in, an extra figure only",
    )


def answer_for(body: Mapping[str, Any]) -> str:
    """The scripted answer, numbered after the question being asked.

    The first "question N" of the last user message is the person's own text: recalled memory
    (earlier questions, in a DM) only ever follows it, and these benchmark threads have no
    preceding chatter ahead of it.
    """
    match = QUESTION.search(str(body["messages"][-1]))
    return ANSWER.format(n=match.group(1) if match else "?")


def _assembled(plan: TurnPlan) -> AssembledRequest:
    """The real request, built the way the measured tree builds it: through the plan's prompt
    builder, or (a baseline from before the PromptBuilder port) the plan's `assemble`."""
    builder = getattr(plan, "builder", None)
    if builder is None:
        old: Any = plan
        built: AssembledRequest = old.assemble(plan.history)
        return built
    fresh: AssembledRequest = builder.build(plan.prompt, plan.history)
    return fresh


def _body(request: Any) -> Mapping[str, Any]:
    """The Messages body: encoded from the neutral request (a baseline tree built the body)."""
    if hasattr(request, "body"):
        body: Mapping[str, Any] = request.body
        return body
    from bot.model.wire import encode

    return encode(request.request)


class InstantModel:
    """A ModelRuntime that assembles the real request and answers it without any I/O."""

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        request = _assembled(plan)
        body = _body(request)
        text = answer_for(body)
        return TurnOutcome(
            text=text,
            entries=(HistoryEntry("assistant", (TextBlock(text),)),),
            request=body,
            usage=Usage(input_tokens=request.estimated_tokens, output_tokens=60),
        )

    async def aclose(self) -> None:
        return None


@dataclass
class Figures:
    name: str
    latencies: list[float]
    turns: int
    seconds: float
    lost: int
    duplicated: int
    in_order: bool
    cpu_seconds: float = 0.0  # the bot process's CPU (user + system) over the measured rounds
    instant: bool = False  # answered by the in-process stand-in, not through the SDK

    def show(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        p50 = statistics.median(ms) if ms else float("nan")
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else float("nan")
        cpu = self.cpu_seconds * 1000 / self.turns if self.turns else float("nan")
        return (
            f"{self.name:<12} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   "
            f"{self.turns / self.seconds:7.1f} turns/s   cpu {cpu:6.2f} ms/turn   "
            f"lost {self.lost}   duplicated {self.duplicated}   "
            f"per-chat order {'kept' if self.in_order else 'BROKEN'}"
            + ("   model INSTANT (in-process stand-in)" if self.instant else "")
        )


def write_config(
    folder: Path, channel: str, api_url: str, model_url: str | None, store_url: str | None = None
) -> Path:
    """A config with one channel on its fake, no rate limits and deep queues (the benchmark
    sends bursts), the model either in process (no base_url) or on the fake server, and the
    store in SQLite or (`store_url`) PostgreSQL."""
    (folder / "IDENTITY.md").write_text("# Identity\n\nYou are Benchbot.\n", encoding="utf-8")
    model = f'base_url = "{model_url}"\nmax_retries = 0\n' if model_url else ""
    store = f'url = "{store_url}"' if store_url else 'path = "data/bot.sqlite3"'
    path = folder / "bot.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            [agent]
            identity_path = "IDENTITY.md"

            [model]
            {model}
            [store]
            {store}

            [host]
            turns_per_person_per_minute = 0
            queue_per_conversation = 64

            [http]
            enabled = false

            [{channel}]
            enabled = true
            api_url = "{api_url}"
            """
        ),
        encoding="utf-8",
    )
    return path


Round = Callable[[int], Awaitable[tuple[list[float], int, int]]]
ROUND_WITHIN = 120.0  # seconds a round may take before what is missing counts as lost


async def patiently(wait: Callable[[], Awaitable[None]]) -> None:
    """Wait for a round's answers for up to ROUND_WITHIN seconds, calling the fake's own wait
    (which gives up sooner) again until then: a busy machine is slow, not lossy. What never came
    is then counted as lost by the caller."""
    deadline = time.monotonic() + ROUND_WITHIN
    while time.monotonic() < deadline:
        try:
            await wait()
            return
        except (TimeoutError, AssertionError):
            continue


@dataclass
class Measured:
    latencies: list[float]
    seconds: float
    lost: int
    duplicated: int
    cpu_seconds: float = 0.0

    def figures(self, name: str, turns: int, in_order: bool, *, instant: bool) -> Figures:
        return Figures(
            name,
            self.latencies,
            turns,
            self.seconds,
            self.lost,
            self.duplicated,
            in_order,
            self.cpu_seconds,
            instant,
        )


async def measure(
    run_round: Round, warmup: int, rounds: int, settle: Callable[[], Awaitable[float]]
) -> Measured:
    """Run `warmup` unmeasured rounds, then `rounds` measured ones; each round returns its
    latencies and its lost and duplicated answers. `settle` waits until the bot is done with
    what it was given and returns the CPU seconds it has used so far: it is read before the
    first measured round and after the last (the bot's background work belongs to the turns)."""
    for number in range(warmup):
        await run_round(number)
    cpu = await settle()
    measured = Measured([], 0.0, 0, 0)
    started = time.perf_counter()
    for number in range(warmup, warmup + rounds):
        got, missing, extra = await run_round(number)
        measured.latencies += got
        measured.lost += missing
        measured.duplicated += extra
    measured.seconds = time.perf_counter() - started
    measured.cpu_seconds = await settle() - cpu
    return measured


BOTPROC = Path(__file__).with_name("botproc.py")
HERE = Path(__file__).resolve().parent.parent  # this checkout: the bot benchmarked by default
READY_WITHIN = 60.0
SETTLED_AFTER = 0.1  # seconds without the bot using CPU
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class BotProcess:
    """`benchmarks/botproc.py` in a child process, the bot taken from `tree` (default: this
    checkout). Its CPU is read from /proc, so the fakes driving it never count."""

    config: Path
    env: Mapping[str, str]
    tree: Path = HERE
    instant: bool = False  # the in-process stand-in; False: the anthropic SDK to the config's URL
    _process: asyncio.subprocess.Process | None = field(default=None, init=False)

    async def __aenter__(self) -> BotProcess:
        env = {**os.environ, **self.env, "PYTHONPATH": str(self.tree)}
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(BOTPROC),
            str(self.config),
            "instant" if self.instant else "server",
            cwd=self.config.parent,
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), READY_WITHIN)
        if line.strip() != b"ready":
            await self.__aexit__(None, None, None)
            raise RuntimeError(f"the bot process did not start (said {line!r}); see its stderr")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    def cpu(self) -> float:
        """CPU seconds (user + system, every thread) the bot process has used so far."""
        assert self._process is not None
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS

    async def settle(self) -> float:
        """The CPU used so far, read once the bot has stopped working (at most 5 s of waiting)."""
        before = self.cpu()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLED_AFTER)
            now = self.cpu()
            if now == before:
                return now
            before = now
        return before


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the bot's store: a SQLite file, or a throwaway database on the --postgres server",
    )
    parser.add_argument(
        "--postgres",
        default=postgres.admin_url(),
        help="an admin URL of the PostgreSQL server (default: $TEST_POSTGRES_URL, else local)",
    )


@contextlib.asynccontextmanager
async def store_url(args: argparse.Namespace) -> AsyncIterator[str | None]:
    """None for SQLite; for PostgreSQL, a throwaway database's URL, dropped afterwards."""
    if args.store == "sqlite":
        yield None
        return
    async with throwaway_database(args.postgres) as url:
        yield url


@contextlib.asynccontextmanager
async def throwaway_database(admin: str) -> AsyncIterator[str]:
    name = f"bench_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(admin, timeout=5)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    try:
        yield postgres.with_database(admin, name)
    finally:
        # Dropped by a detached process, as the tests drop theirs: PostgreSQL 15 checkpoints on
        # DROP DATABASE, seconds (tens of seconds on a busy server) the figures need not wait for.
        postgres.stop(postgres.PgServer(admin, name))


def add_bot_tree(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bot-tree",
        type=Path,
        default=HERE,
        help="the source tree whose bot is measured (default: this checkout); "
        "benchmarks.compare passes a baseline commit's",
    )
