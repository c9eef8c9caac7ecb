"""A recording resumer (port: `bot.ports.intake.Resumer`): it continues a suspended turn by noting
what it was given and returning a fixed host note, so a test sees which continuations ran, in
what order, and what the model read next.
"""

from __future__ import annotations

from bot.ports.intake import Resumer
from bot.turns import Continuation, TurnRequest

DEFAULT_NOTE = "[The host: the approved call ran. It returned: 42.]"


class RecordingResumer(Resumer):
    """Keeps each (request, continuation) it resumed in `resumed` and returns `note` for each."""

    def __init__(self, note: str = DEFAULT_NOTE) -> None:
        self.note = note
        self.resumed: list[tuple[TurnRequest, Continuation]] = []

    async def resume(self, request: TurnRequest, continuation: Continuation) -> str:
        self.resumed.append((request, continuation))
        return self.note
