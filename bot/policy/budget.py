"""Spend budgets: the price table, what a turn cost, and whether the next turn may call the model.

Budgets are daily, in tokens or US dollars, at three levels: overall, per surface (each Slack
channel, each Telegram group...; a `[[surfaces]]` rule sets its own) and per person (everywhere,
or on one rule's surfaces). Usage is counted from what the API reported for each turn, kept in the
store (`bot.ports.records.UsageLedger`), so budgets hold across restarts. A day starts at
midnight in `budget.timezone`. "Tokens" are every token a turn processed: input, cache reads
and writes, and output; money weighs them by the price table, cache reads and writes priced as
Anthropic does.

Cost breakers (`SpendCaps`, SPEC §17) bound one turn rather than a day: a token cap on every turn
people start, on every request-driven run (cron, webhooks), and each job's tokens per day; the
model runtime stops a turn that would pass its cap (`bot.ports.model.Breakers`).

When a budget is reached, the turn is refused before any model call, and the person gets one short
notice with the reset time, once per budget and day (not per message). Operators are exempt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.ports.model import Breakers
from bot.ports.records import Spent, TurnRecord, Usage, UsageEntry, UsageLedger
from bot.turns import ConversationKind, TurnRequest

PER_MILLION = 1_000_000
# A request-driven run may make one tool call (same name, same arguments) this many times; the
# next identical call stops the run (SPEC §17).
REPEATED_CALLS = 3
# Anthropic's cache pricing, as multiples of the model's input price.
CACHE_READ_FACTOR = 0.1
CACHE_WRITE_5M_FACTOR = 1.25
CACHE_WRITE_1H_FACTOR = 2.0


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetLimits(_Table):
    """Daily limits; a limit left unset does not apply."""

    daily_tokens: Annotated[int, Field(ge=1, le=10**12)] | None = None
    daily_usd: Annotated[float, Field(gt=0, le=10**7)] | None = None
    person_daily_tokens: Annotated[int, Field(ge=1, le=10**12)] | None = None
    person_daily_usd: Annotated[float, Field(gt=0, le=10**7)] | None = None

    @property
    def uses_money(self) -> bool:
        return self.daily_usd is not None or self.person_daily_usd is not None


class ModelPrice(_Table):
    """US dollars per million tokens. Cache prices default to Anthropic's multiples of input."""

    input: Annotated[float, Field(ge=0, le=10_000)]
    output: Annotated[float, Field(ge=0, le=10_000)]
    cache_read: Annotated[float, Field(ge=0, le=10_000)] | None = None
    cache_write_5m: Annotated[float, Field(ge=0, le=10_000)] | None = None
    cache_write_1h: Annotated[float, Field(ge=0, le=10_000)] | None = None


# List prices (USD per million tokens) by model-name prefix; `budget.prices` adds or overrides.
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "claude-opus-4-5": ModelPrice(input=5.0, output=25.0),
    "claude-opus-4": ModelPrice(input=15.0, output=75.0),
    "claude-sonnet-4": ModelPrice(input=3.0, output=15.0),
    "claude-haiku-4": ModelPrice(input=1.0, output=5.0),
    "claude-3-5-haiku": ModelPrice(input=0.8, output=4.0),
}


class BudgetSettings(BudgetLimits):
    """`[budget]`: the overall limits, the default per-person limits, and how to count."""

    # The most tokens (input, cache and output, all calls) one turn people start may use.
    max_tokens_per_turn: Annotated[int, Field(ge=1000, le=10**10)] | None = 2_000_000

    timezone: str | None = None  # day boundaries; agent.timezone when unset
    operators: list[str] = []  # person ids (`slack:T…:U…`, `telegram:12345`) never limited
    prices: dict[str, ModelPrice] = {}

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError("not a known IANA timezone (e.g. 'Europe/Berlin', 'UTC')") from exc
        return value


@dataclass(frozen=True)
class SpendCaps:
    """Token caps for one turn: `turn` for turns people start, `run` for request-driven runs,
    `job_day` for the tokens one job (one request-driven conversation) may use per day.
    None: no such cap."""

    turn: int | None = None
    run: int | None = None
    job_day: int | None = None
    repeats: int = REPEATED_CALLS

    async def breakers(
        self, request: TurnRequest, budgets: Budgets | None, now: datetime
    ) -> Breakers:
        """What stops this turn: a request-driven run gets the smaller of its run cap and what
        its job has left today (0 when nothing is left), and the repeated-call breaker."""
        if request.kind is not ConversationKind.REQUEST:
            return Breakers(self.turn, "turn")
        if self.job_day is None or budgets is None:
            return Breakers(self.run, "run", self.repeats)
        left = max(self.job_day - await budgets.spent_tokens(request, now), 0)
        if self.run is not None and self.run <= left:
            return Breakers(self.run, "run", self.repeats)
        return Breakers(left, "day", self.repeats)


NO_CAPS = SpendCaps()


def price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: the entry whose name is its longest prefix."""
    table = {**DEFAULT_PRICES, **prices}
    matches = [name for name in table if model.startswith(name)]
    return table[max(matches, key=len)] if matches else None


def cost_usd(usage: Usage, price: ModelPrice | None) -> float:
    """What `usage` cost at `price`; 0 when the price is unknown."""
    if price is None:
        return 0.0
    write_1h = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    write_5m = usage.cache_write_tokens - write_1h
    rates = (
        (usage.input_tokens, price.input),
        (usage.output_tokens, price.output),
        (usage.cache_read_tokens, _or(price.cache_read, price.input * CACHE_READ_FACTOR)),
        (write_5m, _or(price.cache_write_5m, price.input * CACHE_WRITE_5M_FACTOR)),
        (write_1h, _or(price.cache_write_1h, price.input * CACHE_WRITE_1H_FACTOR)),
    )
    return sum(tokens * rate for tokens, rate in rates) / PER_MILLION


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def surface_key(request: TurnRequest) -> str:
    """Where a turn happened, for budgets and `bot usage`: `<channel>:<surface id>`, or the
    conversation key for turns without a surface (console, cron, webhooks)."""
    if request.surface is None:
        return request.conversation_key
    return f"{request.channel}:{request.surface.id}"


@dataclass(frozen=True)
class Refusal:
    """A budget that is reached: which one, when it resets, and whether to tell the person now."""

    scope: str  # "overall", "surface" or "person"
    resets_at: datetime  # local time in the budget's timezone
    notify: bool


# A budget to check: scope, notice key, counted on surface, counted for person, token and USD limit.
_Wanted = tuple[str, str, str | None, str | None, int | None, float | None]


@dataclass(frozen=True)
class _Check:
    scope: str
    key: str  # the ledger key for the notice
    spent: Spent
    tokens: int | None
    usd: float | None

    @property
    def reached(self) -> bool:
        return (self.tokens is not None and self.spent.tokens >= self.tokens) or (
            self.usd is not None and self.spent.cost_usd >= self.usd
        )


@dataclass(frozen=True, slots=True)
class PersonalUsage:
    """One person's usage today against their own daily limits (None: no limit)."""

    spent: Spent
    token_limit: int | None
    usd_limit: float | None
    resets_at: datetime


class Budgets:
    """Checks a turn against every budget that applies, and charges what a turn used."""

    def __init__(
        self,
        settings: BudgetSettings,
        ledger: UsageLedger,
        *,
        timezone: str,
        default_model: str,
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        self._zone = ZoneInfo(settings.timezone or timezone)
        self._default_model = default_model
        self._operators = frozenset(settings.operators)

    def day(self, now: datetime) -> tuple[datetime, datetime]:
        """The start of `now`'s budget day and the next reset, both in the budget timezone."""
        local = now.astimezone(self._zone)
        start = datetime(local.year, local.month, local.day, tzinfo=self._zone)
        following = start.date() + timedelta(days=1)
        reset = datetime(following.year, following.month, following.day, tzinfo=self._zone)
        return start, reset

    async def check(
        self, request: TurnRequest, rule: BudgetLimits | None, now: datetime
    ) -> Refusal | None:
        """None when the turn may call the model; else the first budget it would break."""
        if request.person is not None and request.person in self._operators:
            return None
        start, reset = self.day(now)
        for check in await self._checks(request, rule, start):
            if check.reached:
                # One notice per budget, place and day: later messages there stay unanswered.
                notice_key = f"{check.scope}:{check.key}|{surface_key(request)}"
                notify = await self._ledger.first_notice(notice_key, start.date().isoformat())
                return Refusal(check.scope, reset, notify)
        return None

    async def _checks(
        self, request: TurnRequest, rule: BudgetLimits | None, since: datetime
    ) -> list[_Check]:
        """Every budget that applies, with what was spent against it today."""
        overall, person, surface = self._settings, request.person, surface_key(request)
        wanted: list[_Wanted] = [
            ("overall", "all", None, None, overall.daily_tokens, overall.daily_usd)
        ]
        if rule is not None:
            wanted.append(("surface", surface, surface, None, rule.daily_tokens, rule.daily_usd))
        if person is not None:
            tokens, usd = overall.person_daily_tokens, overall.person_daily_usd
            wanted.append(("person", person, None, person, tokens, usd))
        if person is not None and rule is not None:
            tokens, usd = rule.person_daily_tokens, rule.person_daily_usd
            wanted.append(("person", f"{person}@{surface}", surface, person, tokens, usd))
        checks = []
        for scope, key, on_surface, of_person, token_limit, usd_limit in wanted:
            if token_limit is None and usd_limit is None:
                continue
            spent = await self._ledger.spent(since, surface=on_surface, person=of_person)
            checks.append(_Check(scope, key, spent, token_limit, usd_limit))
        return checks

    async def personal(self, person: str, now: datetime) -> PersonalUsage:
        """What `person` has used today, their own daily limits and when the day resets (the
        `/usage` command's answer)."""
        start, reset = self.day(now)
        spent = await self._ledger.spent(start, person=person)
        limits = self._settings
        exempt = person in self._operators
        return PersonalUsage(
            spent,
            None if exempt else limits.person_daily_tokens,
            None if exempt else limits.person_daily_usd,
            reset,
        )

    async def spent_here(self, request: TurnRequest, now: datetime) -> Spent:
        """What was used today where this turn happens (for a console or request-driven turn:
        its conversation)."""
        start, _ = self.day(now)
        return await self._ledger.spent(start, surface=surface_key(request), person=None)

    async def spent_tokens(self, request: TurnRequest, now: datetime) -> int:
        """Tokens used today where this turn happens (for a request-driven run: its job's
        conversation)."""
        return (await self.spent_here(request, now)).tokens

    async def charge(self, request: TurnRequest, record: TurnRecord) -> None:
        """Count what a finished turn used (nothing when it used nothing)."""
        entry = self.entry(request, record)
        if entry is not None:
            await self._ledger.add(entry)

    def entry(self, request: TurnRequest, record: TurnRecord) -> UsageEntry | None:
        """What a finished turn is charged, for its publication; None when it used nothing."""
        if record.usage.total == 0:
            return None
        return UsageEntry(
            turn_id=record.turn_id,
            at=record.started_at.astimezone(UTC),
            channel=record.channel,
            surface=surface_key(request),
            person=request.person,
            model=self._model_of(record),
            usage=record.usage,
            cost_usd=self.cost_of(record),
        )

    def cost_of(self, record: TurnRecord) -> float:
        """What a turn cost in US dollars (0 for a model the price table does not know)."""
        return cost_usd(record.usage, price_for(self._model_of(record), self._settings.prices))

    def _model_of(self, record: TurnRecord) -> str:
        return str((record.request or {}).get("model") or self._default_model)


def unpriced_models(models: Sequence[str], prices: Mapping[str, ModelPrice]) -> list[str]:
    """The models in `models` the price table does not know (money budgets need a price)."""
    return sorted({m for m in models if price_for(m, prices) is None})
