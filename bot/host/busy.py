"""What a message does when it arrives while its conversation's turn runs (SPEC §19), by the
place's `busy` mode: `queue` (its own turn after this one: the lane's order alone), `collect`
(the next turn takes in every message waiting when it starts), `steer` (the running turn takes
it in at its next model round, as the person's words) or `interrupt` (the running turn is
stopped as by the stop button; the message's own turn follows).

Exactly once: a message taken in is removed from its lane before its words are handed to the
model, and its inbox item ends, marked as consumed by the turn that took it in, in the same
transaction that publishes that turn (`Publication.consumed`). A turn that never publishes (a
kill) leaves every item it took in pending, to run again after the next start with the rest.
Only plain messages are taken in: none with attachments, no host command, no continuation (each
of those keeps its own turn).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog

from bot.host.conclusions import BY_NEWER_MESSAGE
from bot.host.job import Job
from bot.host.lanes import Lanes
from bot.host.lookups import completed
from bot.host.pipeline import Stops, Turn
from bot.policy.surfaces import SurfacePolicy
from bot.ports.intake import RequestCompleter, TurnResult
from bot.ports.model import Steered, Steering
from bot.prompt import Assembler
from bot.prompt.history import render
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)


def takes_part(job: Job) -> bool:
    """Whether a queued job is a plain message that can join another turn."""
    request = job.request
    return (
        request is not None
        and job.item_id is not None  # durable: its item can end with the other turn
        and request.continues is None
        and not request.attachments
        and not request.text.lstrip().startswith("/")  # a host command or a skill keeps its turn
    )


class Busy:
    """Applies the busy mode of a message's place: `arrived` for a message just queued,
    `steering` for a turn about to call the model."""

    def __init__(
        self,
        lanes: Lanes[Job, TurnResult],
        stops: Stops,
        gather: Callable[[str], Awaitable[None]],
        assembler: Assembler,
        completers: Mapping[str, RequestCompleter],
        policy: Callable[[TurnRequest], SurfacePolicy],
    ) -> None:
        self._lanes = lanes
        self._stops = stops
        self._gather = gather  # queue what is pending for a conversation (`WorkSource.gather`)
        self._assembler = assembler
        self._completers = completers
        self._policy = policy

    def arrived(self, job: Job) -> None:
        """A message was just queued behind its conversation's running turn: under `interrupt`,
        stop that turn (its account is published, then this message's turn runs)."""
        request = job.request
        if request is None or not takes_part(job):
            return
        key = request.conversation_key
        running = self._lanes.running(key)
        if running is None or running.request is None:
            return
        if self._policy(request).busy != "interrupt":
            return
        log.info("turn_interrupted", conversation_key=key, by=request.turn_id)
        if not self._stops.cancel(key, BY_NEWER_MESSAGE):  # not at its model call yet
            self._stops.stop_soon(running.request.turn_id, BY_NEWER_MESSAGE)

    def steering(self, turn: Turn) -> Steering | None:
        """Where the turn's model rounds get the messages sent meanwhile: every round under
        `steer`, the first round alone under `collect` (what waited when it started); None for
        the other modes."""
        mode = turn.policy.busy
        if mode not in ("steer", "collect"):
            return None
        key = turn.request.conversation_key

        async def steer(round_number: int) -> Sequence[Steered]:
            if mode == "collect" and round_number > 0:
                return ()
            await self._gather(key)  # replicas: what others accepted for it meanwhile
            taken = self._lanes.take(key, takes_part)
            absorbed = turn.job.absorbed
            for job, future in taken:  # recorded before anything awaits: the turn owns them now
                assert job.item_id is not None
                absorbed.items.append(job.item_id)
                absorbed.futures.append(future)
                job.trace.end()
            steered = [await self._words(job) for job, _ in taken]
            absorbed.entries += [one.entry for one in steered]
            if steered:
                log.info("turn_took_in", mode=mode, messages=len(steered), round=round_number)
            return steered

        return steer

    async def _words(self, job: Job) -> Steered:
        """A taken message as it is stored (a user entry with its speaker) and as the model reads
        it (the same entry rendered)."""
        assert job.request is not None
        request = await completed(self._completers, job.request)
        entry = self._assembler.priced(self._assembler.user_entry(request))
        [message] = render([entry])
        return Steered(entry, message.parts)
