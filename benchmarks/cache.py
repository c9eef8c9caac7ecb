"""Benchmark: prompt-cache share and cache-weighted input cost over the 40-turn group scenario.

Run: `.venv/bin/python -m benchmarks.cache [--skills all|none] [--data PATH]`

The scenario (`../shared/bench/group-40.json`, SPEC §12) becomes one Slack thread in a shared
channel: its identity and guardrails are the agent's files, its skills live in a skills root, and
each turn carries the messages others posted since the bot's last answer (the preceding fence),
the mention, and the memory facts (as recall hits). Turns go through the real pipeline: `Host`
(lanes, recall, the real `Assembler`, publish to a SQLite history store) and `AnthropicRuntime`
over HTTP to the fake Anthropic server, which answers with the scenario's fixed answer and
reports usage from its cache simulator. The simulator's clock follows the scenario's timestamps,
so cache lifetimes (5 minutes / 1 hour) are honoured as in production.

Figures, per turn and as the mean over turns 10-40:
- share: cache-read input tokens / all input tokens of the request;
- weighted: input + cache writes + cache reads / 10 (cache reads counted at a tenth).
Plus the new-conversation figure: the first turn of a new thread right after the 40th turn, its
share served from cache, next to the agent-wide part's share of that request (its ceiling).

Skills: the scenario ships five skills (name, description, body) and no selection list, and no
mention starts with `/skill-name`. The config's `selected_skills` defaults to none and nothing is
auto-selected (SPEC §3), so the scenario implies an index of five skills with their bodies on disk
for `load_skill`: `--skills none`, the default. `--skills all` selects all five (their bodies then
ride the agent-wide cached part) for comparison; `--skills both` prints both.

`--history-messages N` sets store.history_messages (default 64); `--prune-step S` is a what-if
in which history over N messages is cut S messages at a time instead of one turn at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from bot.agentfiles import load_agent
from bot.cli.compose import build_assembler
from bot.config import Config, Secrets, Settings, StoreSettings
from bot.host import Host
from bot.model import AnthropicRuntime
from bot.ports import (
    DeliveryReport,
    HistoryStore,
    MemoryCapture,
    MemoryHit,
    MemoryScope,
    Tool,
)
from bot.prompt import TokenCounter
from bot.recall import RecallCache
from bot.store import open_store
from bot.tools import LoadSkillTool
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
)
from tests.fakes.anthropic import FakeAnthropic, ManualClock, breakpoint_tokens

# A byte-identical copy of ../shared/bench/group-40.json, so the suite can smoke-run it anywhere.
DATA = Path(__file__).resolve().parent / "data" / "group-40.json"
MODEL = "claude-sonnet-4-5"
TEAM, CHANNEL = "T0BENCH", "C0BENCH"
SLACK_PART_LIMIT = 3800
MEAN_FROM, MEAN_TO = 10, 40
TARGET_SHARE, TARGET_WEIGHTED = 0.85, 1450
DEFAULT_HISTORY = StoreSettings().history_messages


@dataclass(frozen=True)
class Figure:
    turn: int
    input: int
    read: int
    write: int

    @property
    def total(self) -> int:
        return self.input + self.read + self.write

    @property
    def share(self) -> float:
        return self.read / self.total if self.total else 0.0

    @property
    def weighted(self) -> float:
        return self.input + self.write + self.read / 10


class ScriptedMemory:
    """Recall returns the scenario's facts for the current turn; capture keeps nothing."""

    def __init__(self) -> None:
        self.facts: Sequence[str] = ()
        self.at: datetime | None = None

    async def recall(self, query: str, scope: MemoryScope) -> list[MemoryHit]:
        at = self.at or datetime.now()
        return [
            MemoryHit(f"fact-{i}", fact, scope.surface, 1.0, at)
            for i, fact in enumerate(self.facts)
        ]

    async def capture(self, item: MemoryCapture) -> None:
        return None


class SteppedHistory:
    """What-if for `--prune-step`: history bounded to `limit` messages, cut `step` at a time.

    It wraps an unbounded store and hides everything before the last cut, the way a store that
    prunes with hysteresis (over `limit`: drop down to `limit - step`) would keep it. The first
    replayed message then stays put between cuts, so the history prefix stays cacheable.
    """

    def __init__(self, inner: HistoryStore, limit: int, step: int) -> None:
        self._inner, self._limit, self._step = inner, limit, step
        self._start: dict[str, int] = {}

    async def load(self, key: str) -> list[HistoryEntry]:
        full = await self._inner.load(key)
        start = self._start.get(key, 0)
        while len(full) - start > self._limit:
            start += self._step
        self._start[key] = start
        return full[start:]

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        await self._inner.publish(key, entries, replace=replace)

    async def reset(self, key: str) -> bool:
        return await self._inner.reset(key)

    async def conversations(self) -> list[str]:
        return await self._inner.conversations()


class QuietDeliverer:
    """Accepts every answer as delivered in one part (delivery is not what this measures)."""

    async def deliver(self, route: ReplyRoute, text: str) -> DeliveryReport:
        return DeliveryReport(parts=1, accepted=1)

    def working(self, route: ReplyRoute) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def route_to(self, destination: str) -> ReplyRoute:
        return ReplyRoute("slack", {"channel": destination})


def write_agent(folder: Path, data: Mapping[str, Any], skills: str) -> dict[str, Any]:
    """The scenario's texts as agent files; the `agent` section of the settings."""
    (folder / "IDENTITY.md").write_text(data["identity"], encoding="utf-8")
    (folder / "SOUL.md").write_text(data["guardrails"], encoding="utf-8")
    root = folder / "skills"
    for skill in data["skills"]:
        path = root / skill["name"] / "SKILL.md"
        path.parent.mkdir(parents=True)
        front = f"---\nname: {skill['name']}\ndescription: {skill['description']}\n---\n"
        path.write_text(front + skill["body"], encoding="utf-8")
    selected = [s["name"] for s in data["skills"]] if skills == "all" else []
    return {
        "identity_path": folder / "IDENTITY.md",
        "soul_path": folder / "SOUL.md",
        "skills_root": root,
        "selected_skills": selected,
    }


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def turn_request(turn: Mapping[str, Any], key: str, number: int) -> TurnRequest:
    mention = turn["mention"]
    text = mention["text"].removeprefix("@Quill").strip()
    preceding = tuple(
        PrecedingMessage(moment(m["at"]), m["name"], m["text"], m.get("handle"))
        for m in turn["preceding"]
    )
    return TurnRequest(
        conversation_key=key,
        kind=ConversationKind.PUSH,
        channel="slack",
        text=text,
        received_at=moment(mention["at"]),
        turn_id=f"bench-{number}",
        speaker=Speaker(mention["name"], mention.get("handle")),
        surface=Surface(
            SurfaceKind.CHANNEL, CHANNEL, "team", shared=True, message_budget=SLACK_PART_LIMIT
        ),
        preceding=preceding,
        route=ReplyRoute("slack", {"channel": CHANNEL, "thread_ts": key.rsplit(":", 1)[-1]}),
        person=f"slack:{TEAM}:{mention.get('handle')}",
    )


@contextlib.asynccontextmanager
async def pipeline(
    folder: Path,
    data: Mapping[str, Any],
    skills: str,
    fake: FakeAnthropic,
    history_messages: int,
    prune_step: int,
) -> AsyncIterator[tuple[Host, ScriptedMemory]]:
    """The real host, assembler, SQLite history and model runtime, wired like `bot run`."""
    settings = Settings.model_validate(
        {
            "agent": write_agent(folder, data, skills),
            "model": {"name": MODEL, "base_url": fake.base_url},
            "store": {
                "path": folder / "bench.sqlite3",
                "history_messages": 10_000 if prune_step else history_messages,
            },
            "host": {"turns_per_person_per_minute": 0},
        }
    )
    config = Config(settings, Secrets({}), None)
    agent = load_agent(settings.agent)
    counter = TokenCounter(calibration=settings.model.token_calibration)
    runtime = AnthropicRuntime(settings.model, "sk-bench-not-a-secret", counter)
    store = await open_store(settings.store, settings.memory)
    memory = ScriptedMemory()
    load_skill = LoadSkillTool(agent, settings.agent.skill_max_bytes)

    def tools_for(request: TurnRequest, recall: RecallCache) -> Sequence[Tool]:
        tools: list[Tool] = [recall.tool()]
        return [*tools, load_skill] if load_skill.available else tools

    host = Host(
        assembler=build_assembler(config, agent, counter),
        model=runtime,
        history=SteppedHistory(store.history, history_messages, prune_step)
        if prune_step
        else store.history,
        inbox=store.inbox,
        outbox=store.outbox,
        memory=memory,
        tools_for=tools_for,
        settings=settings.host,
    )
    host.attach("slack", QuietDeliverer())
    try:
        yield host, memory
    finally:
        await host.close()
        await runtime.aclose()
        await store.aclose()


async def run_turn(
    host: Host,
    memory: ScriptedMemory,
    fake: FakeAnthropic,
    clock: ManualClock,
    turn: Mapping[str, Any],
    request: TurnRequest,
) -> Figure:
    clock.now = request.received_at.timestamp()
    memory.facts, memory.at = turn["memory"], request.received_at
    fake.script(turn["answer"])
    before = len(fake.usages)
    result = await host.run(request)
    if result.outcome != "ok" or len(fake.usages) != before + 1:
        raise RuntimeError(f"turn {request.turn_id} did not complete: {result}")
    usage = fake.usages[-1]
    return Figure(
        int(turn["n"]),
        usage["input_tokens"],
        usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"],
    )


async def scenario(
    data: Mapping[str, Any],
    skills: str,
    history_messages: int = DEFAULT_HISTORY,
    prune_step: int = 0,
) -> tuple[list[Figure], Figure, float]:
    clock = ManualClock()
    turns = data["turns"]
    with tempfile.TemporaryDirectory() as tmp:
        wiring = (Path(tmp), data, skills)
        async with (
            FakeAnthropic(clock=clock) as fake,
            pipeline(*wiring, fake, history_messages, prune_step) as (host, memory),
        ):
            root = moment(turns[0]["mention"]["at"]).timestamp()
            key = f"slack:{TEAM}:{CHANNEL}:{root:.6f}"
            figures = [
                await run_turn(host, memory, fake, clock, turn, turn_request(turn, key, turn["n"]))
                for turn in turns
            ]
            # A new top-level mention right after the 40th turn: a new thread, a new conversation.
            first = dict(turns[0])
            later = moment(turns[-1]["mention"]["at"]).timestamp() + 60
            first["mention"] = {
                **turns[0]["mention"],
                "at": datetime.fromtimestamp(later, moment(turns[0]["mention"]["at"]).tzinfo)
                .isoformat()
                .replace("+00:00", "Z"),
            }
            request = turn_request(first, f"slack:{TEAM}:{CHANNEL}:{later:.6f}", 41)
            fresh = await run_turn(host, memory, fake, clock, first, request)
            agent_wide = breakpoint_tokens(fake.requests[-1])[0]
    return figures, fresh, agent_wide / fresh.total


def report(skills: str, figures: list[Figure], fresh: Figure, ceiling: float) -> dict[str, Any]:
    print(f"\n== skills: {skills} ==")
    print(f"{'turn':>4} {'input':>7} {'read':>7} {'write':>7} {'share':>6} {'weighted':>9}")
    for f in figures:
        print(
            f"{f.turn:>4} {f.input:>7} {f.read:>7} {f.write:>7} {f.share:>6.3f} {f.weighted:>9.1f}"
        )
    window = [f for f in figures if MEAN_FROM <= f.turn <= MEAN_TO] or figures
    share = statistics.mean(f.share for f in window)
    weighted = statistics.mean(f.weighted for f in window)
    print(
        f"mean over turns {MEAN_FROM}-{MEAN_TO}: share {share:.3f} (target >= {TARGET_SHARE}), "
        f"weighted {weighted:.0f} tokens (target <= {TARGET_WEIGHTED})"
    )
    print(
        f"new conversation after turn 40: share {fresh.share:.3f} "
        f"(agent-wide part is {ceiling:.3f} of that request); "
        f"input {fresh.input}, read {fresh.read}, write {fresh.write}, "
        f"weighted {fresh.weighted:.0f}"
    )
    return {
        "skills": skills,
        "mean_share": round(share, 4),
        "mean_weighted": round(weighted, 1),
        "new_conversation_share": round(fresh.share, 4),
        "agent_wide_share": round(ceiling, 4),
        "meets_targets": share >= TARGET_SHARE and weighted <= TARGET_WEIGHTED,
    }


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--skills", choices=["all", "none", "both"], default="none")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--turns", type=int, default=0, help="only the first N turns (0: all)")
    parser.add_argument(
        "--history-messages",
        type=int,
        default=DEFAULT_HISTORY,
        help="store.history_messages (default: the config default, %(default)s)",
    )
    parser.add_argument(
        "--prune-step",
        type=int,
        default=0,
        help="what-if: prune history in steps of this many messages instead of one turn at a time",
    )
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.turns:
        data = {**data, "turns": data["turns"][: args.turns]}
    summaries = []
    for skills in ["all", "none"] if args.skills == "both" else [args.skills]:
        figures, fresh, ceiling = await scenario(
            data, skills, args.history_messages, args.prune_step
        )
        summaries.append(report(skills, figures, fresh, ceiling))
    print("\n" + json.dumps(summaries, indent=1))


if __name__ == "__main__":
    main()
