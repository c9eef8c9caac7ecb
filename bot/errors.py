"""The one exception tree of the host and its channels.

Every error the program raises on purpose is a `BotError`; its message says what is wrong, where,
and (when a person can act on it) how to fix it (`Fix: ...`). The branches say which part failed:

BotError
├── ConfigError              the configuration, a file it names, a token or a service's setup
│   ├── PolicyError          a [[surfaces]] rule (its instructions file, its skills)
│   ├── TemplateError        a prompt template (a slot that does not exist, a stray brace)
│   ├── ScheduleError        a cron schedule or webhook setting
│   ├── CheckFailed          a `bot doctor` check of a platform (the token, the scopes)
│   ├── EncodingUnavailable  the bundled tokenizer file is missing or corrupt
│   └── ServerRefused        an MCP server lists more than its bounds allow (that server only)
├── StoreError               the durable store cannot do what was asked
│   ├── StoreOpenError       the database file or its folder cannot be opened or created
│   ├── SchemaTooNewError    the file was written by a newer version of the program
│   ├── StoreClosedError     an operation arrived after the store was closed
│   ├── TargetNotEmptyError  `bot store migrate` found data in the target already
│   ├── ClaimLost            a replica's inbox item was adopted by another (it was taken for gone)
│   ├── UnreadableRecord     a stored entry, request or route this program cannot read
│   ├── DuplicateKey         a row refused for its unique key (stored already)
│   └── StoreFault           a write to a table of the in-memory store a test told to fail
├── ModelError               the model API cannot be used (start-up checks)
│   ├── ModelAuthError       the API refused the key
│   ├── TurnFailed           the model runtime gave up on a turn (carries what finished)
│   │   └── BreakerTripped   a cost breaker stopped it (a token cap, a repeated tool call)
│   └── WindowExceeded       the request cannot fit the model's window even with no history
├── IntakeError              input the host will not take
│   ├── IntakeUnavailable    not now (shutting down, store unwritable): do not acknowledge it
│   ├── LaneFull             the conversation's queue is full
│   ├── BadInput             outside input the host will not read (a webhook body, an event file)
│   └── UnknownSkill         a `/name` command that names no skill
├── ChannelUnavailable       a platform cannot be reached, or answers garbage, at start (retried)
├── DeliveryError            an answer could not be posted
│   ├── PartFailed           the platform refused a part for good
│   ├── PartDelayed          a part was not taken yet (rate limit): try again after `retry_after`
│   ├── RouteError           a route or destination names no place on the platform
│   ├── SplitError           the text cannot be split within the platform's limit
│   ├── StreamRefused        the platform will not stream here (not enabled, scope, method)
│   └── StreamBusy           a streaming call was rate-limited: try again after `retry_after`
├── FileError                a file a person shared was not read
│   ├── FileRefused          not downloaded (too large, refused, failed): `reason` says which
│   ├── FileUnreadable       downloaded, but the model cannot be given it; the message says why
│   └── AudioRefused         a voice note or audio file was not transcribed: `reason` says why
└── ToolError                a tool call failed in a way the model should be told about
    └── ToolCallFailed       a call to an MCP server produced no result (the short reason why)

TurnSpend is no error: it is the value a TurnFailed carries of what its calls spent.

Errors that a validator raises (templates, rules, schedules, bad input, unreadable records) are
ValueErrors too, so pydantic and the parsers' callers treat them as invalid values. This module
imports nothing from the rest of the program, so every part, channels included, may raise these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # values only carried, never used here: no import at run time
    from bot.ports.model import BudgetFacts, LeftOut
    from bot.ports.records import Usage
    from bot.turns import HistoryEntry


class BotError(Exception):
    """Anything the host or a channel cannot do; the message says what, where and the fix."""


# --- configuration ------------------------------------------------------------------------------


class ConfigError(BotError):
    """The configuration cannot be used. The message says what, where, and how to fix it."""


class PolicyError(ConfigError, ValueError):
    """A rule cannot be used (its instructions file is missing...); the message says the fix."""


class TemplateError(ConfigError, ValueError):
    """A template cannot be used; the message names the problem and the fix."""


class ScheduleError(ConfigError, ValueError):
    """A schedule that cannot be used; the message says what is wrong and what to write instead."""


class CheckFailed(ConfigError):
    """What `bot doctor` prints as the failure of a platform check: what is wrong, the fix."""


class EncodingUnavailable(ConfigError):
    """The bundled BPE file for an encoding is missing or corrupt."""


class ServerRefused(ConfigError):
    """An MCP server's tool list is past its bounds (`max_tools`, `max_schema_bytes`,
    `max_list_bytes`): that server is refused, the host goes on without it."""


# --- the store ----------------------------------------------------------------------------------


class StoreError(BotError):
    """The durable store cannot do what was asked."""


class StoreOpenError(StoreError):
    """The database file or its folder cannot be opened or created."""


class SchemaTooNewError(StoreError):
    """The database was written by a newer program; this one cannot safely use it."""


class StoreClosedError(StoreError):
    """The store was closed before this operation ran."""


class TargetNotEmptyError(StoreError):
    """The PostgreSQL store already holds data; a migration only fills an empty one."""


class ClaimLost(StoreError):
    """The inbox item is no longer this replica's (it was taken for gone and its conversation was
    adopted by another): nothing of the turn's end was written."""


class UnreadableRecord(StoreError, ValueError):
    """A stored history entry, request or route is not one this program can read."""


class DuplicateKey(StoreError):
    """A row was refused because one with its unique key is stored already (a UNIQUE constraint
    in SQL, the same check in the in-memory store); nothing of the operation was written."""


class StoreFault(StoreError):
    """A write to a table of the in-memory store that a test told to fail
    (`bot.testing.tables.Tables.failing`); nothing of the operation was written."""


# --- the model ----------------------------------------------------------------------------------


class ModelError(BotError):
    """The model API could not be used (see the message for what failed and how to fix it)."""


class ModelAuthError(ModelError):
    """The model API refused the key: ANTHROPIC_API_KEY is wrong, revoked or missing."""


@dataclass(frozen=True, slots=True)
class TurnSpend:
    """What a turn's model calls spent and used before the runtime gave up: the last request
    sent, the usage and attempts, the budget of the last request assembled, the tool calls that
    ran, and attachment content the API named as refused (kept out of replays too). The same
    facts as on `TurnOutcome`, for the turn record."""

    request: Mapping[str, Any] | None = None
    usage: Usage | None = None
    attempts: int = 0
    budget: BudgetFacts | None = None
    tool_calls: Sequence[Mapping[str, Any]] = ()
    left_out: tuple[LeftOut, ...] = ()


NOTHING_SPENT = TurnSpend()


class TurnFailed(ModelError):
    """The model runtime gave up on a turn; carries whatever finished before it did: the text
    streamed so far, the turn's new history entries and what its calls spent."""

    def __init__(
        self,
        message: str,
        *,
        spend: TurnSpend = NOTHING_SPENT,
        partial_text: str = "",
        entries: Sequence[HistoryEntry] = (),
        reply: str | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.spend = spend
        self.partial_text = partial_text
        self.entries = entries
        self.reply = reply  # what the person should be told, when not the default
        self.timed_out = timed_out  # the last call got no answer in time


class BreakerTripped(TurnFailed):
    """A cost breaker stopped the turn (SPEC §17). `breaker` says which: `tokens` (a token cap;
    `scope` names it: turn, run or day) or `repeat` (an identical tool call asked for again)."""

    def __init__(self, message: str, *, breaker: str, scope: str, **carried: Any) -> None:
        super().__init__(message, **carried)
        self.breaker = breaker
        self.scope = scope

    @property
    def code(self) -> str:
        """What the turn record's error starts with: `breaker:<kind>`."""
        kind = self.scope if self.breaker == "tokens" else self.breaker
        return f"breaker:{kind}"


class WindowExceeded(ModelError):
    """The request cannot fit the model's window even with no history at all."""

    code = "estimated_input_exceeds_model_limit"

    def __init__(self, estimated: int, limit: int) -> None:
        super().__init__(
            f"{self.code}: the prompt needs about {estimated} tokens before any history, but the "
            f"model's window leaves {limit} for input (context window minus max_tokens). Fix: "
            "shorten the message, the identity or the selected skills, or raise "
            "model.context_window / lower model.max_tokens."
        )
        self.estimated = estimated
        self.limit = limit


# --- intake -------------------------------------------------------------------------------------


class IntakeError(BotError):
    """Input the host will not take (now, or at all)."""


class IntakeUnavailable(IntakeError):
    """The host cannot take an event now (shutting down, store unwritable): do not
    acknowledge it, so the platform delivers it again. `closing`: it will take none again."""

    def __init__(self, message: str, *, closing: bool = False) -> None:
        super().__init__(message)
        self.closing = closing


class LaneFull(IntakeError):
    """The conversation already has as many turns waiting as its lane holds."""


class BadInput(IntakeError, ValueError):
    """Outside input the host will not read; the message says what is wrong with it."""


class UnknownSkill(IntakeError):
    """A `/name` command named no skill. The message is the reply for the person."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


# --- delivery -----------------------------------------------------------------------------------


class ChannelUnavailable(BotError):
    """A channel could not start because its platform is unreachable or answers something that
    is not its API (a proxy's error page): not the configuration's fault, so the host keeps
    running and tries again. The message is one line naming the URL and the fix."""


class DeliveryError(BotError):
    """An answer, or a part of one, could not be posted."""


class PartFailed(DeliveryError):
    """The platform refused a part for good (not a rate limit or a passing failure)."""


class PartDelayed(DeliveryError):
    """The platform did not take a part yet (rate-limited past the deliverer's own waits); the
    host tries again in-process, not before `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RouteError(DeliveryError, ValueError):
    """A route or destination does not name a place on the platform (a chat, a channel)."""


class StreamRefused(DeliveryError):
    """The platform refused a streaming method for good (not enabled, missing scope, unknown
    method): the answer is posted whole instead; the message names the fix."""


class StreamBusy(DeliveryError):
    """A streaming call was rate-limited; the next one may come after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SplitError(DeliveryError, ValueError):
    """The text cannot be split within the limit (the limit is smaller than the markup needs)."""


# --- files people share -------------------------------------------------------------------------


class FileError(BotError):
    """A shared file was not read."""


class FileRefused(FileError):
    """A shared file was not downloaded. `reason` is "too_large", "refused" (the platform said
    no, or the URL is not the platform's own) or "failed"; the message is for the log only and
    never holds a URL, a file id or a token."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class FileUnreadable(FileError, ValueError):
    """The file cannot be given to the model (damaged, too large to decode, an unknown type);
    the message is a short reason for the person and the model."""


class AudioRefused(FileError):
    """A voice note or audio file was not transcribed. `reason` is "too_long", "unreadable" (not
    audio, or damaged), "failed" (the model could not be loaded or run) or "timeout"; `seconds`
    is the audio's length where it is known. The message is for the log only."""

    def __init__(self, reason: str, detail: str, seconds: float | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.seconds = seconds


# --- tools --------------------------------------------------------------------------------------


class ToolError(BotError):
    """A tool call failed in a way the model should be told about."""


class ToolCallFailed(ToolError):
    """A call to an MCP server produced no result (not started, hung, crashed, refused, garbage);
    the message is the short reason the model is given."""
