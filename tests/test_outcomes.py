"""Turn outcomes are an enum whose values are the strings turn records have always stored."""

from __future__ import annotations

import json

from bot.ports.intake import Admission
from bot.turns import Outcome

STORED = {
    "ok",
    "silent",
    "command",
    "compacted",
    "refused",
    "over_budget",
    "stopped",
    "failed",
    "crashed",
    "cancelled",
    "suspended",
    "undelivered",
    "busy",
    "rate_limited",
    "closed",
}


def test_the_values_are_the_strings_records_store() -> None:
    assert {outcome.value for outcome in Outcome} == STORED
    assert json.dumps({"outcome": Outcome.OVER_BUDGET}) == '{"outcome": "over_budget"}'
    assert f"{Outcome.RATE_LIMITED}" == "rate_limited"


def test_a_refusal_at_admission_is_an_outcome_of_the_same_name() -> None:
    for admission in (Admission.BUSY, Admission.RATE_LIMITED, Admission.CLOSED):
        assert Outcome(admission.value) == admission.value
