"""Two agents in one host: each turn is answered by the agent its message addresses among its
place's, with that agent's own assembler (identity, cached prefix) and tools only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.agents import Agent, Roster
from bot.config import HostSettings
from bot.host import Host
from bot.host.inputs import HostStores, Mind, Outlets, Thinking, ToolsFor, TurnRules
from bot.memory.recall import RecallCache
from bot.policy.surfaces import SurfaceRule, load_policies
from bot.ports.tools import Tool, ToolSpec
from bot.prompt import AgentTexts, TokenCounter
from bot.testing.delivery import RecordingDeliverer
from bot.testing.model import ScriptedModel
from bot.testing.store import open_memory_store
from bot.turns import TurnRequest
from tests.host.rig import request
from tests.prompt.builders import GUARDRAILS, make_assembler


class _Named:
    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name, f"the {name} tool", {"type": "object"})

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        return "done"


def _tools(*names: str) -> ToolsFor:
    def tools_for(request: TurnRequest, recall: RecallCache, rule: object = None) -> list[Tool]:
        return [_Named(name) for name in names]

    return tools_for


def _host(counter: TokenCounter, model: ScriptedModel) -> tuple[Host, RecordingDeliverer]:
    ops = Agent("ops", display_name="Ops", tools=("tickets__*",))
    critic = Agent("critic")
    identity = {"ops": "You are Ops.", "critic": "You are the Critic."}
    minds = {
        name: Mind(
            make_assembler(counter, agent=AgentTexts(GUARDRAILS, identity[name], (), ())),
            _tools("tickets__open", "reviews__read"),
        )
        for name in identity
    }
    rules = load_policies([SurfaceRule(platform="slack", agents=["ops", "critic"])])
    deliverer = RecordingDeliverer()
    store = open_memory_store()
    host = Host(
        thinking=Thinking(
            minds["ops"].assembler, model, minds["ops"].tools_for, Roster([ops, critic]), minds
        ),
        stores=HostStores(store.history, store.inbox, store.outbox),
        outlets=Outlets({"test": deliverer}),
        settings=HostSettings(turns_per_person_per_minute=0),
        rules=TurnRules(policies=rules),
    )
    return host, deliverer


def _system(plan: Any) -> str:
    """The system text of the request the plan's builder makes."""
    built = plan.builder.build(plan.prompt, plan.history)
    return "\n".join(section.text for section in built.request.sections)


async def test_each_turn_carries_its_own_agents_identity_and_tools(counter: TokenCounter) -> None:
    model = ScriptedModel()
    host, _ = _host(counter, model)
    for n, text in enumerate(["hello", "@critic is this sound?", "Ops, go on"]):
        result = await host.run(replace(request(n, text=text), channel="slack"))
        assert result.outcome.value == "ok", result
    first, second, third = model.plans
    assert "You are Ops." in _system(first)
    assert "You are the Critic." not in _system(first)
    assert "You are the Critic." in _system(second)
    assert [tool.spec.name for tool in first.tools] == ["tickets__open"]  # ops's globs
    assert [tool.spec.name for tool in second.tools] == ["tickets__open", "reviews__read"]
    assert "You are Ops." in _system(third)
    assert [plan.prompt.request.agent for plan in model.plans] == ["ops", "critic", "ops"]
