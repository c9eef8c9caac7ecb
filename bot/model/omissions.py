"""What one turn's requests go without (SPEC §11, no poison turns): images and documents left
out to fit the API's request size, and content the API refused, left out of the next try.

When the API refuses a request for what it carried (a 400 that is not an overflow, or a 413),
the call is made again without the content it named (or without every image and document when it
named none, or for a 413), as often as that leaves out something new. What was left out goes back
on the outcome, so the host can tell the person and keep refused content out of later replays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from bot.model.calls import _CallError
from bot.model.retry import WireError, refused_block
from bot.ports.model import LeftOut
from bot.prompt.fitting import MAX_MEDIA, REQUEST_BUDGETS, fit_request, media_blocks, media_id

log = structlog.get_logger(__name__)


class Omissions:
    """The content one turn's calls go without, and the byte budget its requests must fit."""

    def __init__(self, turn_id: str) -> None:
        self._turn_id = turn_id
        self.refused: dict[str, bool] = {}  # content id -> the API named it
        self._too_large: dict[str, None] = {}  # content ids left out for size, oldest first
        self._sized_out = False  # a 413 said the size was misjudged: no media at all

    def fit(self, body: dict[str, Any], wire: str = "anthropic") -> dict[str, Any]:
        """`body` (encoded for `wire`) without refused content, its media cut (oldest first)
        to the wire's request size and media count."""
        budget = 0 if self._sized_out else REQUEST_BUDGETS.get(wire, min(REQUEST_BUDGETS.values()))
        fitted = fit_request(body, self.refused, budget, MAX_MEDIA.get(wire))
        for content_id in fitted.left_out:
            if content_id not in self._too_large:
                self._too_large[content_id] = None
                log.warning("attachment_left_out", reason="request_size", turn_id=self._turn_id)
        return fitted.body

    def leave_out(self, error: _CallError, sent: Mapping[str, Any]) -> bool:
        """Leave out what a refused request (`sent`) carried, for the next try: the block the API
        named, else every image and document (for a 413, by size). False when nothing is left to
        try."""
        found = list(media_blocks(sent))
        if not found:
            return False
        cause = error.cause
        if isinstance(cause, WireError) and cause.status == 413:
            if self._sized_out:
                return False
            self._sized_out = True  # the size was misjudged: this turn goes without any media
            log.warning("model_request_too_large", files=len(found), turn_id=self._turn_id)
            return True
        place = refused_block(cause)
        named = [block for m, b, block in found if (m, b) == place]
        for block in named or [block for _, _, block in found]:
            self.refused.setdefault(media_id(block), bool(named))
        log.warning(
            "model_refused_content",
            named=bool(named),
            files=len(named or found),
            error=str(error),
            turn_id=self._turn_id,
        )
        return True

    def left_out(self, *, answered: bool) -> tuple[LeftOut, ...]:
        """What the calls went without. Refused content the API did not name counts only when
        the turn was answered without it: a failure then says it was not the cause."""
        refused = [
            LeftOut(content_id, refused=True)
            for content_id, named in self.refused.items()
            if named or answered
        ]
        sized = [LeftOut(c, refused=False) for c in self._too_large if c not in self.refused]
        return (*refused, *sized) if answered else tuple(refused)
