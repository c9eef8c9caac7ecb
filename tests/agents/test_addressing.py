"""Which agent a message answers to: `@name` anywhere, the display name opening it, else the
place's first agent (SPEC §15). The text is untrusted: properties over any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.agents import Agent, Roster, addressed
from bot.policy.surfaces import SurfaceRule

OPS = Agent("ops", display_name="Ops")
CRITIC = Agent("critic", display_name="The Critic")
WRITER = Agent("writer")
ROSTER = Roster([WRITER, OPS, CRITIC])
HERE = SurfaceRule(platform="slack", id="C1", agents=["ops", "critic"])


def test_a_mention_picks_the_agent_among_the_places() -> None:
    assert ROSTER.answering("what do you think, @critic?", HERE) is CRITIC
    assert ROSTER.answering("@OPS restart it", HERE) is OPS


def test_the_display_name_opening_the_message_addresses_it() -> None:
    assert ROSTER.answering("The Critic, is this plan sound?", HERE) is CRITIC
    assert ROSTER.answering("I asked the critic already", HERE) is OPS  # not opening it


def test_nobody_named_goes_to_the_places_first_agent_and_no_rule_to_the_default() -> None:
    assert ROSTER.answering("hello", HERE) is OPS
    assert ROSTER.answering("@writer hello", HERE) is OPS  # writer may not answer here
    assert ROSTER.answering("@critic hello", None) is WRITER


def test_the_earliest_address_wins_and_lookalikes_are_not_addresses() -> None:
    assert addressed("@critic then @ops", [OPS, CRITIC]) is CRITIC
    for text in ("mail ops@critic.io", "@opsy", "@ops-team", "x@ops"):
        assert addressed(text, [OPS]) is None, text


@given(st.text(max_size=300))
def test_any_text_answers_to_one_of_the_places_agents(text: str) -> None:
    assert ROSTER.answering(text, HERE) in (OPS, CRITIC)


@given(st.text(max_size=200), st.text(max_size=200))
def test_a_mention_with_room_around_it_is_always_heard(before: str, after: str) -> None:
    text = f"{before} @critic {after}"
    found = addressed(text, [CRITIC])
    assert found is CRITIC
