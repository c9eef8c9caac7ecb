"""The cost breakers (SPEC §17): whether the next call would take a turn past its token cap, and
whether the model asks for a tool call it already made too often. Each check says why it trips
(None: go on); the turn raises `BreakerTripped` with what it had spent."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.ports.model import Breakers
from bot.turns import ToolUseBlock


def over_token_cap(breakers: Breakers, spent: int, coming: int) -> str | None:
    """Why a call that sends about `coming` tokens, after `spent`, would pass the cap."""
    if breakers.max_tokens is None or spent + coming <= breakers.max_tokens:
        return None
    return (
        f"the turn would pass its token cap ({breakers.tokens_scope}: "
        f"{breakers.max_tokens} tokens; {spent} spent, the next call sends about {coming})"
    )


class RepeatGuard:
    """Counts identical tool calls (same name, same arguments) over one turn."""

    def __init__(self, allowed: int | None) -> None:
        self._allowed = allowed
        self._seen: dict[str, int] = {}

    def check(self, calls: Sequence[ToolUseBlock]) -> str | None:
        """Why running `calls` would make one of them more than `allowed` times (a model that
        loops would otherwise spend until a cap); else count them and return None."""
        allowed = self._allowed
        if allowed is None:
            return None
        keys = [call_key(call) for call in calls]
        for call, key in zip(calls, keys, strict=True):
            if self._seen.get(key, 0) + keys.count(key) > allowed:
                return (
                    f"the model asked for tool {call.name!r} with the same arguments more than "
                    f"{allowed} times"
                )
        for key in keys:
            self._seen[key] = self._seen.get(key, 0) + 1
        return None


def call_key(call: ToolUseBlock) -> str:
    """A tool call's identity for the repeat breaker: its name and its arguments, canonical."""
    arguments = json.dumps(call.input, sort_keys=True, ensure_ascii=False, default=str)
    return f"{call.name}\x00{arguments}"
