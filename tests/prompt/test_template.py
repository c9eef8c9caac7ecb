"""Prompt templates: slots render, empty facts vanish cleanly, and bad templates are refused with
the slot and the fix named; per-surface instructions and skills stay out of the agent-wide part."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import TemplateError
from bot.ports.model import SurfacePrompt
from bot.prompt import SESSION_SLOTS, TURN_SLOTS, Template
from bot.prompt.template import DEFAULT_SESSION, DEFAULT_TURN
from bot.prompt.tokens import TokenCounter
from bot.turns import Surface, SurfaceKind

from .builders import (
    console_request,
    cron_request,
    make_agent,
    make_assembler,
    slack_request,
    wire_body,
)

FULL_SESSION = DEFAULT_SESSION


def test_a_line_of_empty_slots_vanishes_and_blank_runs_collapse() -> None:
    template = Template.parse(FULL_SESSION, SESSION_SLOTS)
    text = template.render({"conversation": "A.", "secrecy": "S.", "memory": ""})
    assert text == "# This conversation\n\nA.\n\nS."


def test_literal_text_around_an_empty_slot_stays() -> None:
    template = Template.parse(
        FULL_SESSION.replace("{surface}", "Where: {surface_name} ({surface_kind}) {surface_id}"),
        SESSION_SLOTS,
    )
    assert "Where:  () " in template.render({})


def test_braces_can_be_written_literally() -> None:
    template = Template.parse(DEFAULT_TURN.replace("Local time", "{{time}}"), TURN_SLOTS)
    assert template.render({"timestamp": "T"}).splitlines()[1].startswith("{time}: ")


def test_an_unknown_slot_is_named_with_the_known_ones() -> None:
    with pytest.raises(TemplateError, match=r"unknown slot \{surfce\}.*\{surface\}"):
        Template.parse(FULL_SESSION + "{surfce}\n", SESSION_SLOTS, where="session.txt")


@pytest.mark.parametrize("slot", ["local_time", "timestamp", "attachments", "viewing"])
def test_a_per_turn_fact_in_the_system_part_is_refused(slot: str) -> None:
    with pytest.raises(TemplateError, match=r"cannot go there.*system part"):
        Template.parse(FULL_SESSION + f"Now: {{{slot}}}\n", SESSION_SLOTS)


def test_a_session_fact_in_the_turn_context_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"\{instructions\}.*session template"):
        Template.parse(DEFAULT_TURN + "{instructions}\n", TURN_SLOTS)


@pytest.mark.parametrize(
    ("slot", "fact"),
    [
        ("{secrecy}", "the secrecy rule"),
        ("{delivery}", "where a request-driven answer goes"),
        ("{message_budget}", "the message budget"),
        ("{instructions}", "the surface's instructions"),
    ],
)
def test_a_template_that_drops_a_required_fact_is_refused(slot: str, fact: str) -> None:
    with pytest.raises(TemplateError, match=f"drops {fact}"):
        Template.parse(FULL_SESSION.replace(slot, ""), SESSION_SLOTS)


def test_a_turn_context_that_drops_what_the_person_has_open_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"drops what the person has open.*\{viewing\}"):
        Template.parse(DEFAULT_TURN.replace("{viewing}", ""), TURN_SLOTS)


def test_a_fact_nothing_would_fill_may_be_left_out() -> None:
    text = FULL_SESSION.replace("{instructions}", "").replace("{skills}", "")
    Template.parse(text, SESSION_SLOTS, optional=["instructions", "skills"])


def test_either_slot_of_a_fact_will_do() -> None:
    text = DEFAULT_TURN.replace("{weekday} {timestamp} ({timezone})", "{local_time}")
    Template.parse(text, TURN_SLOTS)


@pytest.mark.parametrize("field", ["{surface!r}", "{surface:>10}", "{surface[0]}", "{0}", "{"])
def test_only_plain_slots_are_allowed(field: str) -> None:
    with pytest.raises(TemplateError, match="line 3"):
        Template.parse(f"a\nb\n{field}\n" + FULL_SESSION, SESSION_SLOTS)


@given(st.text(max_size=300))
def test_any_text_parses_or_is_refused_clearly(text: str) -> None:
    try:
        template = Template.parse(text, TURN_SLOTS)
    except TemplateError:
        return
    template.render({"timestamp": "T", "attachments": ""})


def test_a_custom_template_renders_the_facts_it_names() -> None:
    session = Template.parse(
        "Kind: {conversation_kind}. Surface {surface_kind} {surface_id}, "
        "parts of {message_budget_chars}.\n\n{conversation}\n{console_id}\n{delivery}\n"
        "{secrecy}\n{memory}\n{instructions}\n{skills}\n",
        SESSION_SLOTS,
    )
    assembler = make_assembler(TokenCounter(), session_template=session)
    body = assembler.assemble(slack_request(), [])
    block = wire_body(body)["system"][-1]["text"]
    assert block.startswith("Kind: push. Surface channel C0A1B2C3D, parts of 3800.")


def _system(body: dict[str, Any]) -> list[str]:
    return [block["text"] for block in body["system"]]


def test_the_agent_wide_part_is_byte_identical_across_surfaces_with_different_rules() -> None:
    assembler = make_assembler(TokenCounter())
    here = slack_request(
        key="slack:T1:C1:1.0",
        surface=Surface(SurfaceKind.CHANNEL, "C1", "support", True, 3800, "Slack", True),
    )
    there = slack_request(
        key="slack:T1:C2:1.0",
        surface=Surface(SurfaceKind.CHANNEL, "C2", "sales", True, 3800, "Slack", True),
    )
    a = wire_body(
        assembler.assemble(here, [], surface=SurfacePrompt("Answer in one line.", ("summarize",)))
    )
    b = wire_body(
        assembler.assemble(
            there, [], surface=SurfacePrompt("Be thorough; cite the wiki.", ("research",))
        )
    )
    agent_a, agent_b = _system(a)[:-1], _system(b)[:-1]
    assert json.dumps(a["system"][:-1]) == json.dumps(b["system"][:-1])  # cache_control too
    assert agent_a == agent_b
    assert not any("Answer in one line" in text for text in agent_a)
    session_a, session_b = _system(a)[-1], _system(b)[-1]
    assert "Answer in one line." in session_a
    assert "Be thorough" in session_b
    assert "# Skill: summarize" in session_a
    assert "List decisions." in session_a
    assert "# Skill: research" in session_b


def test_a_surface_skill_already_agent_wide_is_not_repeated() -> None:
    assembler = make_assembler(TokenCounter(), agent=make_agent(selected=("standup",)))
    body = assembler.assemble(slack_request(), [], surface=SurfacePrompt(skills=("standup",)))
    assert "Skill: standup" not in _system(wire_body(body))[-1]
    assert sum("Skill: standup" in text for text in _system(wire_body(body))) == 1


def test_the_surface_model_and_answer_limit_go_in_the_body() -> None:
    assembler = make_assembler(TokenCounter())
    body = wire_body(
        assembler.assemble(
            slack_request(), [], surface=SurfacePrompt(model="claude-opus-4-1", max_tokens=512)
        )
    )
    assert (body["model"], body["max_tokens"]) == ("claude-opus-4-1", 512)
    default = wire_body(assembler.assemble(slack_request(), []))
    assert (default["model"], default["max_tokens"]) == ("claude-sonnet-4-5", 4096)


def test_instructions_stay_byte_identical_across_turns_and_out_of_the_user_message() -> None:
    assembler = make_assembler(TokenCounter())
    rule = SurfacePrompt("Only talk about the release.")
    first = wire_body(assembler.assemble(slack_request("one"), [], surface=rule))
    later = slack_request("two", at=slack_request().received_at.replace(hour=17))
    second = wire_body(assembler.assemble(later, [], surface=rule))
    assert first["system"] == second["system"]
    assert "Only talk about" not in json.dumps(first["messages"])


@pytest.mark.parametrize("request_", [console_request(), cron_request()])
def test_surfaceless_turns_render_as_before(request_: object) -> None:
    assembler = make_assembler(TokenCounter())
    block = _system(wire_body(assembler.assemble(request_, [])))[-1]  # type: ignore[arg-type]
    assert block.startswith("# This conversation\n\n")
    assert "\n\n\n" not in block
