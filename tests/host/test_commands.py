"""The handlers the host answers itself (`bot.host.commands`): no model call, each concluding
with its own record and item state, through the in-memory doubles."""

from __future__ import annotations

import pytest

from bot import replies
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.turns import Outcome
from tests.host.doubles import CannedModel
from tests.host.rig import request, rig, submit


@pytest.mark.parametrize(
    ("text", "said", "outcome", "state"),
    [
        ("/memory", replies.MEMORY_OFF, Outcome.OK, InboxState.ANSWERED),
        ("/usage", replies.USAGE_PRIVATE, Outcome.COMMAND, InboxState.REFUSED),
        ("/compact", replies.NOTHING_TO_COMPACT, Outcome.COMPACTED, InboxState.ANSWERED),
    ],
)
async def test_a_host_command_is_answered_without_the_model(
    counter: TokenCounter, text: str, said: str, outcome: Outcome, state: InboxState
) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    await submit(r.host, 1, text=text)
    await r.host.idle()

    assert r.model.plans == []
    assert [t for _, t in r.deliverer.posted] == [said]
    assert [rec.outcome for rec in r.records] == [outcome]
    assert r.inbox.states == {1: state}
    await r.host.close(grace=0)


async def test_start_greets_and_help_lists_without_the_model(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    await submit(r.host, 1, text="/start")
    await submit(r.host, 2, text="/help")
    await r.host.idle()

    assert r.model.plans == []
    assert [rec.outcome for rec in r.records] == [Outcome.COMMAND, Outcome.COMMAND]
    assert len(r.deliverer.posted) == 2
    assert r.history.entries == {request(1).conversation_key: []}  # none kept in history
    await r.host.close(grace=0)


async def test_a_name_that_is_no_skill_is_refused_with_what_there_is(
    counter: TokenCounter,
) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    await submit(r.host, 1, text="/nosuchskill do it")
    await r.host.idle()

    assert r.model.plans == []
    (record,) = r.records
    assert (record.outcome, record.error) == (Outcome.REFUSED, "unknown_skill")
    assert "nosuchskill" in r.deliverer.posted[0][1]
    await r.host.close(grace=0)


async def test_a_command_beside_the_conversation_takes_no_lane(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel(gated=True))
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()  # the conversation's turn is in the model call

    assert await r.host.command(request(2, text="/memory")) == replies.MEMORY_OFF
    assert await r.host.command(request(3, text="/what")) == replies.COMMAND_UNKNOWN
    r.model.release.set()
    await r.host.close(grace=60)
