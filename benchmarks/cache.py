"""Benchmark: prompt-cache share and cache-weighted input cost over the 40-turn group scenario.

Run: `.venv/bin/python -m benchmarks.cache [--memory on|off|both] [--skills none|all]
                                           [--turns N] [--data PATH] [--wire anthropic|openai|both]
                                           [--baseline REV]`

`--data benchmarks/data/tools-40.json` plays the tool-heavy variant (Anthropic wire): the same
turns, each mention answered after one to three rounds of calls to the notes MCP server's `big`
tool (the server is configured and allowed on the group); a turn's figure then sums all its
calls. `--baseline REV` first plays the same scenario with the bot of commit REV (exported from
git, in a subprocess; driver and fakes from this checkout) and ends with both means side by side.

The scenario (`data/group-40.json`, a copy of `../shared/bench/group-40.json`, SPEC §12) is
played as a Telegram group through the real thing: the composition root (`App`, as `bot run`
wires it) with the Telegram channel on python-telegram-bot polling the fake Bot API, the SQLite
store with its real long-term memory (capture after every turn, automatic recall before every
turn, the memory_recall tool offered), the real assembler and `AnthropicRuntime` over HTTP to the
fake Messages API. Before each mention, the messages others posted go to the group as ordinary
messages (the channel keeps them in its buffer and hands them to the turn as the preceding
fence); the mention addresses the bot; the fake model answers with the scenario's fixed answer.
The fake server's cache simulator serves, at each request's breakpoints, the longest prefix that
is byte-identical to one an earlier request cached (SPEC §3), and reports usage as the provider
does.

Memory: with `on`, the scenario's memory facts are first remembered as things the group's
members said in the group the day before; whether any of them (or any captured exchange) comes
back is then up to the real recall. The "recalled" column counts the hits in each request.

Figures, per turn and as the mean over turns 10-40:
- share: cache-read input tokens / all input tokens of the request;
- weighted: input + cache writes + cache reads / 10 (cache reads counted at a tenth).
Plus the new-conversation figure: the first turn in another group right after the 40th turn, its
share served from cache, next to the agent-wide part's share of that request (its ceiling).

Skills: the scenario ships five skills and no selection: `--skills none` (default) indexes them
(bodies on disk for `load_skill`); `--skills all` selects all five into the agent-wide part.

Wires: `--wire openai` plays the same scenario with `provider = "openai"` against the fake Chat
Completions server (tests/fakes/openai.py), whose usage models OpenAI's automatic prefix caching:
the longest byte-identical prefix of an earlier request, in 128-token steps from 1,024 tokens,
is served from cache (`cached_tokens`), with no cache writes. Its token counts are o200k_base,
not Claude's, so the two wires' weighted figures are each in their own tokens.

Time: the turns run back to back in real time (the simulator's clock is the real one, so nothing
expires mid-run); message dates follow the scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from bot.cli.compose import App, Runs
from bot.cli.settings import load_config
from bot.ports.memory import MemoryCapture
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall, breakpoint_tokens
from tests.fakes.openai import FakeOpenAI, count_tokens
from tests.fakes.telegram import FakeTelegram

# A byte-identical copy of ../shared/bench/group-40.json, so the suite can smoke-run it anywhere.
DATA = Path(__file__).resolve().parent / "data" / "group-40.json"
MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-5-mini"
GROUP, OTHER_GROUP = -1001234, -1005678
MEAN_FROM, MEAN_TO = 10, 40
TARGET_SHARE, TARGET_WEIGHTED = 0.89, 1340
RECALLED = re.compile(r"^- \(\d{4}-\d\d-\d\d\) ", re.MULTILINE)


# The notes server of the tests, for scenarios that call tools (`"mcp": "notes"` in the data).
NOTES = [sys.executable, str(Path(__file__).resolve().parents[1] / "tests/mcp_servers/notes.py")]
NOTES_SERVER = f'\n[[mcp.servers]]\nname = "notes"\ncommand = {json.dumps(NOTES)}\n'
NOTES_RULE = (
    '\n[[surfaces]]\nplatform = "telegram"\nkind = "group"\ntools = ["notes__add", "notes__big", '
    '"notes__search", "memory_recall", "load_skill", "read_attachment", "tool_result_fetch"]\n'
)


@dataclass(frozen=True)
class Figure:
    turn: int
    input: int
    read: int
    write: int
    recalled: int = 0

    @property
    def total(self) -> int:
        return self.input + self.read + self.write

    @property
    def share(self) -> float:
        return self.read / self.total if self.total else 0.0

    @property
    def weighted(self) -> float:
        return self.input + self.write + self.read / 10


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def write_config(
    folder: Path,
    data: Mapping[str, Any],
    skills: str,
    memory: bool,
    tg: str,
    model: str,
    extra: str = "",
    wire: str = "anthropic",
) -> Path:
    """The scenario's texts as agent files and a `bot run` config for Telegram on the fakes
    (`extra`: more TOML, e.g. an MCP server and the group's surface rule)."""
    (folder / "IDENTITY.md").write_text(data["identity"], encoding="utf-8")
    (folder / "SOUL.md").write_text(data["guardrails"], encoding="utf-8")
    for skill in data["skills"]:
        path = folder / "skills" / skill["name"] / "SKILL.md"
        path.parent.mkdir(parents=True)
        front = f"---\nname: {skill['name']}\ndescription: {skill['description']}\n---\n"
        path.write_text(front + skill["body"], encoding="utf-8")
    selected = [s["name"] for s in data["skills"]] if skills == "all" else []
    path = folder / "bot.toml"
    # The default wire is left unsaid, so a baseline bot older than `provider` reads it too.
    provider = "" if wire == "anthropic" else f'provider = "{wire}"\n            '
    path.write_text(
        textwrap.dedent(
            f"""\
            [agent]
            identity_path = "IDENTITY.md"
            soul_path = "SOUL.md"
            skills_root = "skills"
            selected_skills = {json.dumps(selected)}

            [model]
            name = "{MODEL if wire == "anthropic" else OPENAI_MODEL}"
            {provider}base_url = "{model}"
            max_retries = 0

            [store]
            path = "data/bot.sqlite3"

            [memory]
            enabled = {str(memory).lower()}

            [host]
            turns_per_person_per_minute = 0

            [http]
            enabled = false

            [telegram]
            enabled = true
            api_url = "{tg}"
            """
        )
        + extra,
        encoding="utf-8",
    )
    return path


class Group:
    """The scenario's people in a fake Telegram group."""

    def __init__(self, tg: FakeTelegram, chat_id: int) -> None:
        self.tg = tg
        self.chat = tg.group(chat_id, "team")
        self.people: dict[str, dict[str, Any]] = {}

    def person(self, said: Mapping[str, Any]) -> dict[str, Any]:
        handle = str(said.get("handle") or said["name"]).lower()
        if handle not in self.people:
            first, _, last = str(said["name"]).partition(" ")
            user_id = 200_000 + len(self.people)
            self.people[handle] = self.tg.user(first, last or None, handle, user_id=user_id)
        return self.people[handle]

    async def say(self, said: Mapping[str, Any], *, mention: bool = False) -> None:
        text = str(said["text"])
        if mention:
            text = text.removeprefix("@Quill").strip()
        update = self.tg.message(self.chat, self.person(said), text, mention=mention)
        update["message"]["date"] = int(moment(said["at"]).timestamp())
        await self.tg.push(update)


async def remember_facts(app: App, group: Group, turns: Sequence[Mapping[str, Any]]) -> None:
    """The scenario's memory facts, as things the group's members said there the day before."""
    start = moment(turns[0]["mention"]["at"]) - timedelta(days=1)
    members = [group.person(t["mention"]) for t in turns[:3]]
    for n, fact in enumerate(f for turn in turns for f in turn["memory"]):
        member = members[n % len(members)]
        await app.store.memory.capture(
            MemoryCapture(
                conversation_key=f"telegram:{group.chat['id']}",
                surface=f"telegram:{group.chat['id']}",
                person=f"telegram:{member['id']}",
                speaker_label=f"{member['first_name']} (@{member['username']})",
                user_text=fact,
                answer="Noted.",
                at=start + timedelta(minutes=n),
                turn_id=f"earlier-{n}",
            )
        )


Fake = FakeAnthropic | FakeOpenAI


def _figure(fake: Fake, number: int, recalled: int, calls: int = 1) -> Figure:
    """The turn's figure: the usage of its last `calls` calls, summed."""
    usages = fake.usages[-calls:]
    if isinstance(fake, FakeOpenAI):
        cached = sum(usage["prompt_tokens_details"]["cached_tokens"] for usage in usages)
        prompt = sum(usage["prompt_tokens"] for usage in usages)
        return Figure(number, prompt - cached, cached, 0, recalled)
    return Figure(
        number,
        sum(usage["input_tokens"] for usage in usages),
        sum(usage["cache_read_input_tokens"] for usage in usages),
        sum(usage["cache_creation_input_tokens"] for usage in usages),
        recalled,
    )


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [str(block.get("text", "")) for block in content]


def agent_wide_tokens(fake: Fake, body: Mapping[str, Any]) -> int:
    """The agent-wide part of a request in tokens: its first breakpoint (Anthropic), or the
    system messages before the session block's (OpenAI)."""
    if isinstance(fake, FakeOpenAI):
        systems = [m for m in body["messages"] if m["role"] == "system"]
        return count_tokens(json.dumps(systems[:-1], ensure_ascii=False))
    return breakpoint_tokens(body)[0]


async def play(app: App, group: Group, fake: Fake, turn: Mapping[str, Any], number: int) -> Figure:
    """One turn: the others' messages, then the mention; waits for the answer and the capture.
    A turn with `tools` calls them first, one round each: its figure sums all its calls."""
    for said in turn["preceding"]:
        await group.say(said)
    rounds = [
        Reply(tool_calls=[ToolCall(call["name"], call["input"], id=f"toolu_{number}_{index}")])
        for index, call in enumerate(turn.get("tools", ()))
    ]
    if rounds and not isinstance(fake, FakeAnthropic):
        raise SystemExit("a scenario with tool calls runs on the Anthropic wire only")
    fake.script(*rounds, turn["answer"])  # type: ignore[arg-type]  # rounds: Anthropic only
    before, sent = len(fake.usages), len(group.tg.sent)
    await group.say(turn["mention"], mention=True)
    await group.tg.wait_for(lambda: len(group.tg.sent) > sent)
    await app.host.idle()
    calls = len(rounds) + 1
    if len(fake.usages) != before + calls:
        made = len(fake.usages) - before
        raise RuntimeError(f"turn {number} made {made} model calls, not {calls}")
    first = fake.requests[-calls]["messages"][-1]["content"]
    recalled = sum(len(RECALLED.findall(text)) for text in _texts(first))
    return _figure(fake, number, recalled, calls)


async def scenario(
    data: Mapping[str, Any], skills: str, memory: bool, extra: str = "", wire: str = "anthropic"
) -> tuple[list[Figure], Figure, float]:
    turns = data["turns"]
    if data.get("mcp") == "notes":  # a tool-heavy scenario: the notes server, allowed there
        extra += NOTES_SERVER + NOTES_RULE
    fake: Fake = FakeOpenAI() if wire == "openai" else FakeAnthropic()
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegram() as tg, fake:
            path = write_config(
                Path(tmp), data, skills, memory, tg.base_url, fake.base_url, extra, wire
            )
            env = {
                "TELEGRAM_BOT_TOKEN": tg.token,
                "ANTHROPIC_API_KEY": "sk-ant-bench-0000",
                "OPENAI_API_KEY": "sk-openai-bench-0000",
            }
            async with App(load_config(path, env=env), runs=Runs(http=False)) as app:
                group = Group(tg, GROUP)
                if memory:
                    await remember_facts(app, group, turns)
                figures = [await play(app, group, fake, t, int(t["n"])) for t in turns]
                # The first turn again, in another group: a new conversation right after.
                other = Group(tg, OTHER_GROUP)
                first = {**turns[0], "preceding": []}
                fresh = await play(app, other, fake, first, len(turns) + 1)
                ceiling = agent_wide_tokens(fake, fake.requests[-1]) / fresh.total
    return figures, fresh, ceiling


def report(label: str, figures: list[Figure], fresh: Figure, ceiling: float) -> dict[str, Any]:
    print(f"\n== {label} ==")
    print(
        f"{'turn':>4} {'input':>7} {'read':>7} {'write':>7} {'share':>6} {'weighted':>9} recalled"
    )
    for f in figures:
        print(
            f"{f.turn:>4} {f.input:>7} {f.read:>7} {f.write:>7} {f.share:>6.3f} "
            f"{f.weighted:>9.1f} {f.recalled:>8}"
        )
    window = [f for f in figures if MEAN_FROM <= f.turn <= MEAN_TO] or figures
    share = statistics.mean(f.share for f in window)
    weighted = statistics.mean(f.weighted for f in window)
    print(
        f"mean over turns {window[0].turn}-{window[-1].turn}: share {share:.3f} "
        f"(target >= {TARGET_SHARE}), weighted {weighted:.0f} tokens (target <= {TARGET_WEIGHTED})"
        f", recalled hits {sum(f.recalled for f in window)}"
    )
    print(
        f"new conversation after the last turn: share {fresh.share:.3f} "
        f"(agent-wide part is {ceiling:.3f} of that request); "
        f"input {fresh.input}, read {fresh.read}, write {fresh.write}, "
        f"weighted {fresh.weighted:.0f}"
    )
    return {
        "run": label,
        "mean_share": round(share, 4),
        "mean_weighted": round(weighted, 1),
        "recalled_hits": sum(f.recalled for f in window),
        "new_conversation_share": round(fresh.share, 4),
        "agent_wide_share": round(ceiling, 4),
        "meets_targets": share >= TARGET_SHARE and weighted <= TARGET_WEIGHTED,
    }


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--memory", choices=["on", "off", "both"], default="both")
    parser.add_argument("--skills", choices=["all", "none"], default="none")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--turns", type=int, default=0, help="only the first N turns (0: all)")
    parser.add_argument("--wire", choices=["anthropic", "openai", "both"], default="anthropic")
    parser.add_argument(
        "--baseline", help="a commit whose bot plays the same scenario first, for comparison"
    )
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.turns:
        data = {**data, "turns": data["turns"][: args.turns]}
    before = baseline(args.baseline, args.data, argv or sys.argv[1:]) if args.baseline else None
    summaries = []
    wires = ["anthropic", "openai"] if args.wire == "both" else [args.wire]
    for wire in wires:
        for memory in ["on", "off"] if args.memory == "both" else [args.memory]:
            figures, fresh, ceiling = await scenario(data, args.skills, memory == "on", wire=wire)
            label = f"memory {memory}, skills {args.skills}"
            label += ", openai wire" if wire == "openai" else ""
            summaries.append(report(label, figures, fresh, ceiling))
    print("\n" + json.dumps(summaries, indent=1))
    if before is not None:
        compared(args.baseline, before, summaries)


def baseline(rev: str, data: Path, argv: Sequence[str]) -> list[dict[str, Any]]:
    """The summaries of this benchmark, same arguments, with the bot (`bot/`, `channels/`) of
    commit `rev`; the driver and the fakes stay this checkout's, so both are driven alike."""
    from benchmarks.compare import export

    own = [a for i, a in enumerate(argv) if a != "--baseline" and argv[i - 1 : i] != ["--baseline"]]
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder)
        commit = export(rev, tree)
        for name in ("benchmarks", "tests"):  # these come from this checkout
            subprocess.run(["rm", "-rf", str(tree / name)], check=True)
        here = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{here}"}
        print(f"baseline: the bot of {commit[:12]} ...", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.cache", *own, "--data", str(data.resolve())],
            env=env,
            cwd=tree,  # `-m` puts the working folder first on the path: the baseline's bot
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"the baseline run failed:\n{done.stdout}{done.stderr}")
    print(done.stdout)
    summaries: list[dict[str, Any]] = json.loads(done.stdout[done.stdout.rindex("\n[") :])
    return summaries


def compared(rev: str, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    print(f"\n== baseline {rev} against this checkout (mean over turns {MEAN_FROM}-{MEAN_TO}) ==")
    print(f"{'run':<26} {'share before':>12} {'after':>7} {'weighted before':>15} {'after':>7}")
    for old, new in zip(before, after, strict=True):
        print(
            f"{new['run']:<26} {old['mean_share']:>12.3f} {new['mean_share']:>7.3f} "
            f"{old['mean_weighted']:>15.0f} {new['mean_weighted']:>7.0f}"
        )


if __name__ == "__main__":
    main()
