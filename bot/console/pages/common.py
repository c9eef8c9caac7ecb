"""What every page handler shares: the inputs, the renderer, the signed-in operator, times shown
in the operator's zone, and the audit of a change."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.console.inputs import ConsoleInputs
from bot.console.render import SESSION, Renderer
from bot.console.settings import Operator
from bot.ports.console import AuditEntry


@dataclass(frozen=True)
class Console:
    inputs: ConsoleInputs
    render: Renderer

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.inputs.timezone)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.inputs.clock(), UTC)

    def today_start(self) -> datetime:
        """Midnight today where days begin (budgets and usage per day)."""
        local = self.now().astimezone(self.zone)
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    def days_ago(self, days: int) -> datetime:
        return self.today_start() - timedelta(days=days - 1)

    def shown(self, moment: datetime | float | None) -> str:
        if moment is None:
            return "-"
        if isinstance(moment, float | int):
            moment = datetime.fromtimestamp(moment, UTC)
        return moment.astimezone(self.zone).strftime("%Y-%m-%d %H:%M:%S")

    def operator(self, request: web.Request) -> Operator:
        session = request[SESSION]
        return next(op for op in self.inputs.settings.operators if op.name == session.operator)

    async def audit(self, request: web.Request, action: str, target: str, outcome: str) -> None:
        session = request[SESSION]
        entry = AuditEntry(self.inputs.clock(), session.operator, action, target, outcome)
        await self.inputs.store.console.audit(entry)

    def see_other(self, path: str) -> web.Response:
        return web.Response(status=303, headers={"Location": f"{self.render.base}/{path}"})


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """A whole number from the query, kept within bounds; anything else is the default."""
    try:
        value = int(request.query.get(name, default))
    except ValueError:
        return default
    return min(max(value, low), high)
