"""Every sentence the host itself says to a person in chat (refusals, notices), in one place.

Short, plain and polite; each says what happened and what the person can do. None of them ever
names a platform id, a route or a secret.
"""

from __future__ import annotations

from datetime import datetime

# Which budget ran out, as the person should hear it.
_BUDGET_SCOPES = {
    "overall": "my usage budget for today",
    "surface": "today's usage budget for this chat",
    "person": "your usage budget for today",
}


def budget_reached(scope: str, resets_at: datetime) -> str:
    """The one notice a person gets when a daily budget is reached (no model call is made)."""
    what = _BUDGET_SCOPES.get(scope, "a usage budget")
    when = resets_at.strftime("%Y-%m-%d %H:%M")
    zone = resets_at.tzname() or "UTC"
    return (
        f"I've reached {what}, so I'll stay quiet here until it resets at {when} {zone}. "
        "Messages sent before then won't get an answer."
    )
