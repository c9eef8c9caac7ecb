"""The console's pages over a store with data in it: conversations and a turn's record, usage per
day and surface with the same totals as `bot usage`'s grouping and as CSV, approvals decided
through the desk (as a press) and audited, jobs paused and resumed durably, memory searched and
forgotten, the config with secrets masked, and the audit of every change."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.console.inputs import JobView, ServerHealth, ToolOffer
from bot.ports.approvals import Approval, PressAnswer
from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord, Usage, UsageEntry
from bot.turns import ConversationKind, HistoryEntry, Origin, Outcome, TextBlock, TurnRequest
from bot.usage import group, key_of
from tests.console.rig import SECRET, console_rig

KEY = "slack:T1:C1:1700000000.000100"
NOW = datetime.fromtimestamp(1_800_000_000.0, UTC)


class Presses:
    """The desk's side of a press, recorded."""

    def __init__(self) -> None:
        self.presses: list[tuple[str, bool, str]] = []

    async def press(self, approval_id: str, approve: bool, presser: str) -> PressAnswer:
        self.presses.append((approval_id, approve, presser))
        return PressAnswer("Approved. The call runs now.", changed=True)


def _usage(turn_id: str, day: int, surface: str, person: str | None, cost: float) -> UsageEntry:
    at = datetime(2027, 1, day, 12, tzinfo=UTC)
    return UsageEntry(
        turn_id, at, "slack", surface, person, "claude-x", Usage(100, 50, 10, 5), cost
    )


async def test_a_conversation_shows_who_said_what_and_its_turn_record_redacted() -> None:
    async with console_rig() as rig:
        await rig.store.history.publish(
            KEY,
            [
                HistoryEntry(
                    "user", (TextBlock("ship it?"),), speaker="Alice Chen (@alice)", at=NOW
                ),
                HistoryEntry("assistant", (TextBlock("Shipped."),), at=NOW),
            ],
        )
        await rig.store.records.save(
            TurnRecord(
                "turn-1",
                KEY,
                "slack",
                NOW,
                NOW,
                Outcome.OK,
                request={"system": f"key {SECRET}", "messages": []},
                usage=Usage(7, 0, 0, 3),
                details={
                    "trace_id": "abc123",
                    "tool_calls": [{"tool": "notes__add", "arguments": {"t": 1}}],
                },
            )
        )
        await rig.client.sign_in()
        status, page, _ = await rig.client.get(f"/conversations/view?key={KEY}")
        assert status == 200
        assert "Alice Chen (@alice)" in page
        assert "ship it?" in page
        assert "Shipped." in page
        status, page, _ = await rig.client.get("/turns/turn-1")
        assert status == 200
        assert "abc123" in page
        assert "notes__add" in page
        assert SECRET not in page
        assert (await rig.client.get("/turns/nope"))[0] == 404
        assert (await rig.client.get("/conversations/view?key=nope"))[0] == 404


async def test_usage_totals_are_bot_usages_grouping_and_the_csv_says_the_same() -> None:
    async with console_rig() as rig:
        rig.clock.now = datetime(2027, 1, 3, 18, tzinfo=UTC).timestamp()
        rows = [
            _usage("t1", 1, "slack:C1", "slack:T:U1", 0.25),
            _usage("t2", 2, "slack:C1", None, 0.5),
            _usage("t3", 2, "telegram:42", "telegram:42", 0.125),
        ]
        for row in rows:
            await rig.store.usage.add(row)
        await rig.client.sign_in()
        status, page, _ = await rig.client.get("/usage?days=7")
        assert status == 200
        expected = group(rows, key_of("day", ZoneInfo("UTC")))[-1]
        assert f"${expected.cost_usd:.4f}" in page
        assert 'data-total="0.875"' in page  # the spend-per-day chart's bars add up to it
        status, text, headers = await rig.client.get("/usage.csv?by=surface&days=7")
        assert headers["Content-Type"].startswith("text/csv")
        table = list(csv.DictReader(io.StringIO(text)))
        assert [(r["surface"], r["cost_usd"]) for r in table] == [
            ("slack:C1", "0.75"),
            ("telegram:42", "0.125"),
            ("total", "0.875"),
        ]
        status, page, _ = await rig.client.get("/usage?day=2027-01-02")
        assert "$0.6250" in page  # that day alone


async def test_an_operator_decides_an_approval_as_its_approver_and_it_is_audited() -> None:
    desk = Presses()
    async with console_rig(desk=desk) as rig:
        request = TurnRequest(KEY, ConversationKind.PUSH, "slack", "go", NOW, "turn-1")
        await rig.store.approvals.add(
            Approval(
                "approval-0123456789abcdef",
                "turn-1",
                KEY,
                "notes__delete",
                '{"text": "milk"}',
                "d",
                "slack:U0ALICE01",
                ("slack:U0BOB0001",),
                request,
                rig.clock.now,
                rig.clock.now + 600,
            )
        )
        await rig.client.sign_in()
        status, page, _ = await rig.client.get("/approvals")
        assert "notes__delete" in page
        assert "Approve" in page
        csrf = await rig.client.csrf("/approvals")
        status, page, _ = await rig.client.post(
            "/approvals/approval-0123456789abcdef/decide", {"csrf": csrf, "decision": "approve"}
        )
        assert status == 200
        assert "Approved. The call runs now." in page
        assert desk.presses == [("approval-0123456789abcdef", True, "slack:U0BOB0001")]
        [entry] = [e for e in await rig.store.console.audited() if e.action == "approve"]
        assert (entry.operator, entry.target) == ("ada", "approval approval-0123456789abcdef")


async def test_an_operator_without_an_approver_identity_is_told_how_to_get_one() -> None:
    desk = Presses()
    async with console_rig(desk=desk) as rig:
        await rig.client.sign_in("tok", "console-token-0123456789-abcdef")
        csrf = await rig.client.csrf("/approvals")
        _, page, _ = await rig.client.post(
            "/approvals/x/decide", {"csrf": csrf, "decision": "deny"}
        )
        assert "has no approver identity" in page
        assert "Fix:" in page
        assert desk.presses == []


async def test_a_job_is_paused_and_resumed_durably_and_both_are_audited() -> None:
    job = JobView("standup", "0 9 * * 1-5", "UTC", True, "slack:C1", "config")
    async with console_rig(cron=True, jobs=lambda: [job]) as rig:
        runs = await rig.runs()
        await rig.client.sign_in()
        csrf = await rig.client.csrf("/schedules")
        _, page, _ = await rig.client.post("/schedules/pause", {"csrf": csrf, "job": "standup"})
        assert "standup: paused." in page
        [pause] = await runs.paused()
        assert pause.reason == "paused by ada in the console"
        _, page, _ = await rig.client.post("/schedules/pause", {"csrf": csrf, "job": "nope"})
        assert "No job named &#39;nope&#39;" in page
        _, page, _ = await rig.client.post("/schedules/resume", {"csrf": csrf, "job": "standup"})
        assert "resumed" in page
        assert await runs.paused() == []
        actions = [(e.action, e.target) for e in await rig.store.console.audited()]
        assert ("pause", "job standup") in actions
        assert ("resume", "job standup") in actions


async def test_memory_is_searched_and_an_entry_forgotten() -> None:
    async with console_rig() as rig:
        await rig.store.memory.capture(
            MemoryCapture(
                KEY,
                "slack:C1",
                "slack:T:U1",
                "Alice",
                "the gate code is 4417",
                "Noted.",
                NOW,
                origin=Origin.PERSON,
            )
        )
        await rig.client.sign_in()
        _, page, _ = await rig.client.get("/memory?q=gate+code")
        assert "gate code is 4417" in page
        assert "said by slack:T:U1" in page
        assert "origin <strong>person</strong>" in page
        [hit] = await rig.store.memory.search("gate code")
        csrf = await rig.client.csrf("/memory")
        _, page, _ = await rig.client.post("/memory/forget", {"csrf": csrf, "id": hit.id})
        assert f"Forgot entry {hit.id}." in page
        assert await rig.store.memory.search("gate code") == []


async def test_tools_config_and_audit_pages_show_what_they_are_handed_without_secrets() -> None:
    servers = [ServerHealth("notes", False, "it exited (status 1)", 0)]
    offers = [ToolOffer("slack C1", (("notes__add", "read-only"),))]
    async with console_rig(
        servers=lambda: servers, tools=lambda: offers, config_text=lambda: f"key = {SECRET}"
    ) as rig:
        await rig.client.sign_in()
        _, page, _ = await rig.client.get("/tools")
        assert "it exited (status 1)" in page
        assert "notes__add" in page
        _, page, _ = await rig.client.get("/config")
        assert SECRET not in page
        assert "key = " in page
        _, page, _ = await rig.client.get("/audit")
        assert "sign in" in page


async def test_a_person_is_admitted_by_their_pairing_code_and_revoked() -> None:
    async with console_rig() as rig:
        code = await rig.store.access.ask("telegram:4242", "Eve <b>Ng</b>")
        assert code is not None
        await rig.client.sign_in()
        _, page, _ = await rig.client.get("/access")
        assert "Eve &lt;b&gt;Ng&lt;/b&gt;" in page
        csrf = await rig.client.csrf("/access")
        _, page, _ = await rig.client.post("/access/approve", {"csrf": csrf, "code": "NOPE-NOPE"})
        assert "No such code waiting" in page
        rig.clock.now += 1
        _, page, _ = await rig.client.post("/access/approve", {"csrf": csrf, "code": code})
        assert "Admitted telegram:4242" in page
        assert await rig.store.access.admitted("telegram:4242")
        rig.clock.now += 1
        _, page, _ = await rig.client.post(
            "/access/revoke", {"csrf": csrf, "person": "telegram:4242"}
        )
        assert "Revoked telegram:4242." in page
        assert not await rig.store.access.admitted("telegram:4242")
        actions = [e.action for e in await rig.store.console.audited()]
        assert actions[:2] == ["revoke access", "admit"]
