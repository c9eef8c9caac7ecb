"""A compaction's summary call (SPEC §4): the older history replaced by one summary entry the
turn's own model writes (`bot.model.compaction` builds the request and the entry)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from bot.config import ModelSettings
from bot.errors import ModelError
from bot.model import compaction
from bot.model.calls import Calls, _CallError
from bot.model.meter import Meter
from bot.turns import HistoryEntry

log = structlog.get_logger(__name__)


class _CompactionFailed(ModelError):
    """The summary call failed or wrote nothing."""


@dataclass(frozen=True, slots=True)
class Summary:
    """The compacted history (the summary entry, then the verbatim tail), the summary request
    as sent, its attempts, and how many older entries it stands in for."""

    history: list[HistoryEntry]
    body: Mapping[str, Any]
    attempts: int
    summarized: int


async def summarize(
    calls: Calls,
    settings: ModelSettings,
    history: Sequence[HistoryEntry],
    meter: Meter,
    *,
    model: str,
    reason: str,
    focus: str = "",
    window: int | None = None,
) -> Summary | None:
    """Replace the older history by a summary written by `model` (the turn's own, so its price
    and window apply); None when there is nothing older to replace. `focus`: what the person
    asked the summary to keep in view. The files shared in the older part stay named in the
    summary entry. The call's usage is added to `meter` even when it wrote nothing."""
    cut = compaction.split_point(history)
    if cut == 0:
        log.info("compaction_skipped", reason=reason, messages=len(history))
        return None
    older, tail = history[:cut], history[cut:]
    request = compaction.summary_request(
        model, settings.max_tokens, older, window or settings.window, focus
    )
    try:
        call = await calls.call(
            request, None, meter.charge, meter.count, purpose="summary", turn_id=meter.turn_id
        )
    except _CallError as exc:
        raise _CompactionFailed(f"the summary call failed: {exc}") from exc
    meter.usage += call.usage
    text = call.answer.text.strip()
    if not text:
        raise _CompactionFailed("the summary call returned no text")
    summary = compaction.summary_entry(text, compaction.files_of(older))
    compacted = [meter.counted(summary), *tail]
    log.info("compaction", reason=reason, summarized=len(older), kept=len(tail))
    return Summary(compacted, call.body, call.attempts, cut)
