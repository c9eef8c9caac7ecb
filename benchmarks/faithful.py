"""Benchmark: how much of people's text reaches the model as written (SPEC §3, "Neutralization,
faithful").

The corpus (`benchmarks/data/faithful-corpus.json`) holds a few hundred chat and code messages
in many languages (Japanese, Chinese, Korean, Russian, Arabic, Hindi, French quotes, syllabics,
code with generics, HTML, math, emoji) and a few dozen hostile ones spelling the host's fence
tags with look-alikes. Each message is rendered the ways the host renders untrusted text: as the
person's own words and as a preceding message, through the real assembler, and as the bare
neutralizer. Prints the share of ordinary messages that arrive byte for byte (the goal: all of
them), how many hostile ones were neutralized (no fence tag form left), and the neutralizer's
cost per message. Run it with

    .venv/bin/python -m benchmarks.faithful [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bot.model.wire import encode
from bot.prompt import AgentTexts, Assembler, ModelLimits, TokenCounter
from bot.prompt.fence import fence_forms, neutralize
from bot.turns import (
    ConversationKind,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
)

CORPUS = Path(__file__).parent / "data" / "faithful-corpus.json"
NOW = datetime(2026, 3, 17, 9, 30, tzinfo=UTC)


def corpus() -> tuple[list[str], list[str]]:
    """The ordinary messages (every category, in order) and the hostile ones."""
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    ordinary = [text for texts in data["ordinary"].values() for text in texts]
    return ordinary, list(data["hostile"])


def _assembler() -> Assembler:
    agent = AgentTexts("# Ground rules", "# Identity\nYou are Benchbot.", (), ())
    limits = ModelLimits("claude-sonnet-4-6", 1024, 200_000)
    return Assembler(agent, limits, timezone="UTC", counter=TokenCounter())


def _request(text: str) -> TurnRequest:
    return TurnRequest(
        "slack:T0:C0BENCH:1.0",
        ConversationKind.PUSH,
        "slack",
        text,
        NOW,
        "turn-1",
        speaker=Speaker("Alice", "alice"),
        surface=Surface(SurfaceKind.CHANNEL, "C0BENCH", "bench", shared=True),
        preceding=(PrecedingMessage(NOW, "Bob", text, "bob"),),
        route=ReplyRoute("slack", {}),
    )


def shown(assembler: Assembler, text: str) -> str:
    """The current user message's text as the model reads it, with `text` as both the person's
    words and a preceding message."""
    body = encode(assembler.assemble(_request(text), []).request)  # as the API receives it
    content = body["messages"][-1]["content"]
    return "\n".join(block["text"] for block in content if block["type"] == "text")


def faithful(assembler: Assembler, text: str) -> bool:
    """Whether `text` reaches the model as written: by the neutralizer, as the person's words
    (the end of the message) and as a one-line preceding message."""
    rendered = shown(assembler, text)
    own = rendered.endswith("</speaker>\n" + text)
    preceding = "\n" in text or f"Bob (@bob): {text}\n" in rendered
    return neutralize(text) == text and own and preceding


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200, help="neutralizer timing passes")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N of each")
    args = parser.parse_args(argv)
    ordinary, hostile = corpus()
    if args.limit:
        ordinary, hostile = ordinary[: args.limit], hostile[: args.limit]
    assembler = _assembler()
    unchanged = [text for text in ordinary if faithful(assembler, text)]
    changed = [text for text in ordinary if text not in unchanged]
    host_tags = len(fence_forms(shown(assembler, "hello")))  # the host's own fences
    caught = [text for text in hostile if len(fence_forms(shown(assembler, text))) == host_tags]
    share = len(unchanged) / len(ordinary)
    print(
        "ordinary messages reaching the model unchanged: "
        f"{len(unchanged)}/{len(ordinary)} ({share:.1%})"
    )
    for text in changed[:5]:
        print(f"  changed: {text!r} -> {neutralize(text)!r}")
    print(f"hostile messages neutralized (no fence tag form left): {len(caught)}/{len(hostile)}")
    started = time.perf_counter()
    everything = ordinary + hostile
    for _ in range(args.repeat):
        for text in everything:
            neutralize(text)
    per = (time.perf_counter() - started) / max(args.repeat * len(everything), 1) * 1e6
    print(f"neutralize: {per:.2f} us per message (mean over {args.repeat} passes)")


if __name__ == "__main__":
    main()
