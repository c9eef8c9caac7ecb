"""Benchmark: time to assemble one turn (SPEC §12 "assembly").

The turn: a Slack channel mention with 64 history messages (token counts already cached, as the
store keeps them), 30 preceding messages, 5 recalled memory hits and 10 skills (2 selected, 8
indexed). Prints p50 and p99 over many iterations. Run it with

    .venv/bin/python -m benchmarks.assembly [--iterations N] [--warmup N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.ports.memory import MemoryHit
from bot.ports.tools import ToolSpec
from bot.prompt import AgentTexts, Assembler, ModelLimits, Skill, TokenCounter
from bot.prompt.history import entry_tokens
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)

NOW = datetime(2026, 3, 17, 9, 30, tzinfo=UTC)
SENTENCE = "We should ship the adapter once the retry logic has a test and the docs say how. "


def agent() -> AgentTexts:
    skills = tuple(
        Skill(f"skill-{i}", f"Skill number {i}: does a specific thing well.", SENTENCE * 40)
        for i in range(10)
    )
    guardrails = "# Ground rules\n\n" + SENTENCE * 20
    identity = "# Identity\n\n" + SENTENCE * 10
    return AgentTexts(guardrails, identity, skills, ("skill-0", "skill-1"))


def history(counter: TokenCounter) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    for i in range(16):
        at = NOW - timedelta(minutes=5 * (16 - i))
        call = f"toolu_{i}"
        raw = [
            HistoryEntry(
                "user", (TextBlock(f"Question {i}: {SENTENCE}"),), speaker="Bob (@bob)", at=at
            ),
            HistoryEntry("assistant", (ToolUseBlock(call, "memory_recall", {"query": "release"}),)),
            HistoryEntry("user", (ToolResultBlock(call, SENTENCE * 3),)),
            HistoryEntry("assistant", (TextBlock(f"Answer {i}: {SENTENCE * 4}"),)),
        ]
        # The store keeps each message's token count; so does this history.
        entries += [_with_tokens(entry, counter) for entry in raw]
    return entries


def _with_tokens(entry: HistoryEntry, counter: TokenCounter) -> HistoryEntry:
    return replace(entry, tokens=max(1, entry_tokens(entry, counter.count)))


def request() -> TurnRequest:
    preceding = tuple(
        PrecedingMessage(NOW - timedelta(seconds=30 * (30 - i)), f"Person {i}", SENTENCE, f"p{i}")
        for i in range(30)
    )
    return TurnRequest(
        conversation_key="slack:T1:C0A1B2C3D:1742203000.000100",
        kind=ConversationKind.PUSH,
        channel="slack",
        text="Can you summarize where we are and what is left?",
        received_at=NOW,
        turn_id="bench",
        speaker=Speaker("Alice Chen", "alice"),
        surface=Surface(SurfaceKind.CHANNEL, "C0A1B2C3D", "team-platform", True, 3800),
        preceding=preceding,
        route=ReplyRoute("slack", {"channel": "C0A1B2C3D", "thread_ts": "1742203000.000100"}),
    )


def memory() -> list[MemoryHit]:
    return [
        MemoryHit(f"m{i}", f"Remembered fact {i}: {SENTENCE}", "slack:C0A1B2C3D", 1.0, NOW)
        for i in range(5)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    counter = TokenCounter()
    texts = agent()
    tool = ToolSpec("memory_recall", "Search long-term memory.", {"type": "object"})
    assembler = Assembler(
        texts,
        ModelLimits("claude-sonnet-4-5", 4096, 200_000),
        timezone="Europe/Berlin",
        counter=counter,
        tools=(tool,),
    )
    turn, past, hits = request(), history(counter), memory()
    result = assembler.assemble(turn, past, hits)
    for _ in range(args.warmup):
        assembler.assemble(turn, past, hits)
    samples = []
    for _ in range(args.iterations):
        started = time.perf_counter()
        assembler.assemble(turn, past, hits)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(
        f"assembly: history={len(past)} messages (used {result.history_used}), "
        f"preceding={len(turn.preceding)}, memory hits={len(hits)}, skills={len(texts.skills)}"
    )
    print(f"  estimated input tokens: {result.estimated_tokens}")
    print(f"  iterations: {args.iterations}")
    print(f"  p50: {p50:.3f} ms   p99: {p99:.3f} ms   (target p50 <= 2 ms)")


if __name__ == "__main__":
    main()
