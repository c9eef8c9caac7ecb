"""The handlers the host answers itself (`bot.host.commands`): no model call, each concluding
with its own record and item state, through the doubles of `bot.testing`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot import replies
from bot.ports.model import TurnOutcome
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.model import ScriptedModel
from bot.turns import Attachment, HistoryEntry, Outcome, TextBlock
from tests.host.rig import KEY, request, rig, submit


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
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    await submit(r.host, 1, text=text)
    await r.host.idle()

    assert r.model.plans == []
    assert r.posted() == [said]
    assert [rec.outcome for rec in r.records] == [outcome]
    assert r.states() == {1: state}
    await r.host.close(grace=0)


async def test_start_greets_and_help_lists_without_the_model(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    await submit(r.host, 1, text="/start")
    await submit(r.host, 2, text="/help")
    await r.host.idle()

    assert r.model.plans == []
    assert [rec.outcome for rec in r.records] == [Outcome.COMMAND, Outcome.COMMAND]
    assert len(r.posted()) == 2
    assert r.states() == {1: InboxState.REFUSED, 2: InboxState.REFUSED}
    assert await r.store.history.load(KEY) == []  # none kept in history
    await r.host.close(grace=0)


async def test_a_name_that_is_no_skill_is_refused_with_what_there_is(
    counter: TokenCounter,
) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    await submit(r.host, 1, text="/nosuchskill do it")
    await r.host.idle()

    assert r.model.plans == []
    (record,) = r.records
    assert (record.outcome, record.error) == (Outcome.REFUSED, "unknown_skill")
    (said,) = r.posted()
    assert "nosuchskill" in said
    await r.host.close(grace=0)


async def test_a_command_beside_the_conversation_takes_no_lane(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel(gated=True))
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()  # the conversation's turn is in the model call

    assert await r.host.command(request(2, text="/memory")) == replies.MEMORY_OFF
    assert await r.host.command(request(3, text="/what")) == replies.COMMAND_UNKNOWN
    assert r.states() == {1: InboxState.PENDING}  # neither stored nor queued as a turn
    r.model.release.set()
    await r.host.close(grace=60)
    assert r.posted() == ["scripted answer"]


async def test_compact_takes_its_instructions_and_says_it_kept_no_file(
    counter: TokenCounter,
) -> None:
    summary = HistoryEntry("user", (TextBlock("S"),), summary=True)
    r = rig(counter, ScriptedModel(TurnOutcome("Compacted.", (), history=[summary])))
    await r.store.history.publish(KEY, [HistoryEntry("user", (TextBlock("earlier"),))])
    await r.host.resume()
    pdf = Attachment("plan.pdf", "application/pdf", 2048)
    asked = replace(request(1, text="/compact  focus on the open tickets "), attachments=(pdf,))
    await r.host.submit(asked, source="test", marks=["event-1"])
    await r.host.idle()

    [plan] = r.model.plans
    assert (plan.compact_only, plan.compact_focus) == (True, "focus on the open tickets")
    [said] = r.posted()
    assert said == "Compacted.\n\n" + replies.compact_left_files(1)
    await r.host.close(grace=0)
