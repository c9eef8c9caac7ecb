"""What the host-overhead benchmarks share: the scripted answer, the instant model, the figures.

The instant model is a `ModelRuntime` that assembles the real request and answers it without any
I/O, so the benchmarks measure the host and the channel, not a model.
"""

from __future__ import annotations

import re
import statistics
import textwrap
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.ports.model import TurnOutcome, TurnPlan
from bot.ports.records import Usage
from bot.turns import HistoryEntry, TextBlock

ANSWER = textwrap.dedent(
    """\
    **Answer {n}.** Here is what I found 🚀:

    - the deploy failed on the *migration* step
    - the fix is in review (`db/migrate.py`, line 42)

    See [the run](https://ci.example/runs/{n}) & tell me if you want details.
    """
)
QUESTION = re.compile(r"question (\d+)")


def answer_for(body: Mapping[str, Any]) -> str:
    """The scripted answer, numbered after the question being asked.

    The first "question N" of the last user message is the person's own text: recalled memory
    (earlier questions, in a DM) only ever follows it, and these benchmark threads have no
    preceding chatter ahead of it.
    """
    match = QUESTION.search(str(body["messages"][-1]))
    return ANSWER.format(n=match.group(1) if match else "?")


class InstantModel:
    """A ModelRuntime that assembles the real request and answers it without any I/O."""

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        request = plan.assemble(plan.history)
        text = answer_for(request.body)
        return TurnOutcome(
            text=text,
            entries=(HistoryEntry("assistant", (TextBlock(text),)),),
            request=request.body,
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

    def show(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        p50 = statistics.median(ms) if ms else float("nan")
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else float("nan")
        return (
            f"{self.name:<12} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   "
            f"{self.turns / self.seconds:7.1f} turns/s   lost {self.lost}   "
            f"duplicated {self.duplicated}   per-chat order {'kept' if self.in_order else 'BROKEN'}"
        )


def write_config(folder: Path, channel: str, api_url: str, model_url: str | None) -> Path:
    """A config with one channel on its fake, no rate limits and deep queues (the benchmark
    sends bursts), and the model either in process (no base_url) or on the fake server."""
    (folder / "IDENTITY.md").write_text("# Identity\n\nYou are Benchbot.\n", encoding="utf-8")
    model = f'base_url = "{model_url}"\nmax_retries = 0\n' if model_url else ""
    path = folder / "bot.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            [agent]
            identity_path = "IDENTITY.md"

            [model]
            {model}
            [store]
            path = "data/bot.sqlite3"

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


@dataclass
class Measured:
    latencies: list[float]
    seconds: float
    lost: int
    duplicated: int

    def figures(self, name: str, turns: int, in_order: bool) -> Figures:
        return Figures(
            name, self.latencies, turns, self.seconds, self.lost, self.duplicated, in_order
        )


async def measure(
    run_round: Round, warmup: int, rounds: int, settle: Callable[[], Awaitable[None]]
) -> Measured:
    """Run `warmup` unmeasured rounds, `settle`, then `rounds` measured ones; each round returns
    its latencies and its lost and duplicated answers."""
    for number in range(warmup):
        await run_round(number)
    await settle()
    measured = Measured([], 0.0, 0, 0)
    started = time.perf_counter()
    for number in range(warmup, warmup + rounds):
        got, missing, extra = await run_round(number)
        measured.latencies += got
        measured.lost += missing
        measured.duplicated += extra
    measured.seconds = time.perf_counter() - started
    return measured
