"""Which calls wait for an approval, what a press may carry, and the operator's views: unit and
property tests, plus `bot approvals` and `bot doctor` in process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.cli import main
from bot.policy.surfaces import SurfaceRule
from bot.store.sql.approvals import SqlApprovals
from bot.tools.approvals import ApprovalDesk, ApprovalSettings, canonical, digest, needs_approval
from channels.slack.approvals import APPROVE_ACTION, DENY_ACTION, read_press
from channels.telegram.approvals import callback_data, parse_callback
from tests.conftest import write_config
from tests.mcp.conftest import rule_toml, server_toml


@dataclass(frozen=True)
class Info:
    tool: str
    name: str
    read_only: bool | None = None
    destructive: bool | None = None


def test_which_calls_wait() -> None:
    delete = Info("delete", "notes__delete", destructive=True)
    assert needs_approval(delete, (), ())
    assert not needs_approval(delete, (), ("notes__del*",))  # the operator allowed it
    # The operator's globs always hold: a read-only hint does not lift them.
    assert needs_approval(Info("search", "notes__search", read_only=True), ("*",), ())
    assert needs_approval(Info("delete_all", "x__delete_all", read_only=True), ("delete_*",), ())
    assert not needs_approval(
        Info("delete_all", "x__delete_all", read_only=True), ("delete_*",), ("x__delete_all",)
    )
    assert not needs_approval(Info("search", "notes__search", read_only=True), (), ())
    assert not needs_approval(Info("add", "notes__add", destructive=False), (), ())
    assert needs_approval(Info("add", "notes__add"), ("add",), ())  # the server's approve glob
    assert needs_approval(Info("add", "notes__add"), ("notes__a*",), ())
    # Destructive *and* read-only is contradictory: read-only wins, it never waits.
    assert not needs_approval(Info("x", "s__x", read_only=True, destructive=True), (), ())


def test_settings_name_the_key_and_the_fix() -> None:
    with pytest.raises(ValidationError) as caught:
        ApprovalSettings(approvers=["U0123ABCD"])
    assert "approvers" in str(caught.value)
    assert '"telegram:4242"' in str(caught.value)  # says what a good value looks like
    with pytest.raises(ValidationError):
        ApprovalSettings(expire_minutes=0)
    assert ApprovalSettings().requester_may_approve is False


def test_a_surface_rule_names_its_own_approvers_and_the_requester_is_left_out() -> None:
    desk = ApprovalDesk(
        SqlApprovals(None),  # type: ignore[arg-type]  # not reached: nothing is stored here
        ApprovalSettings(approvers=["slack:UBOSS", "slack:UASKER", "telegram:7"]),
    )
    assert desk.approvers_for("slack", "slack:UASKER") == ("slack:UBOSS",)
    assert desk.approvers_for("telegram", "slack:UASKER") == ("telegram:7",)
    rule = SurfaceRule(platform="slack", approvers=["slack:UOPS", "slack:UASKER"])
    assert desk.approvers_for("slack", "slack:UASKER", rule) == ("slack:UOPS",)
    assert desk.approvers_for("slack", "slack:UASKER", SurfaceRule(platform="slack")) == (
        "slack:UBOSS",
    )
    lenient = ApprovalDesk(
        SqlApprovals(None),  # type: ignore[arg-type]
        ApprovalSettings(approvers=["slack:UASKER"], requester_may_approve=True),
    )
    assert lenient.approvers_for("slack", "slack:UASKER") == ("slack:UASKER",)


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=20), st.integers())))
def test_canonical_arguments_hash_the_same_in_any_order(arguments: dict[str, object]) -> None:
    reordered = dict(reversed(list(arguments.items())))
    assert canonical(arguments) == canonical(reordered)
    assert digest(canonical(arguments)) == digest(canonical(reordered))


@given(st.text(alphabet=st.characters(), max_size=80))
def test_telegram_callback_data_is_only_ever_an_id_and_a_verdict(data: str) -> None:
    parsed = parse_callback(data)
    if parsed is not None:
        approval_id, approve = parsed
        assert callback_data(approval_id, approve) == data
        assert approval_id.isascii()
        assert 16 <= len(approval_id) <= 32


@given(st.from_regex(r"[A-Za-z0-9_-]{16,32}", fullmatch=True), st.booleans())
def test_telegram_callback_data_round_trips(approval_id: str, approve: bool) -> None:
    data = callback_data(approval_id, approve)
    assert len(data.encode()) <= 64  # Telegram's limit on callback data
    assert parse_callback(data) == (approval_id, approve)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=40),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
        max_leaves=12,
    )
)
def test_a_hostile_slack_payload_is_a_press_of_ours_or_nothing(body: object) -> None:
    press = read_press(body)
    if press is not None:
        assert 16 <= len(press.approval_id) <= 32


def test_a_slack_press_reads_its_action_user_and_channel() -> None:
    body = {
        "user": {"id": "U1"},
        "channel": {"id": "C1"},
        "trigger_id": "t1",
        "actions": [{"action_id": DENY_ACTION, "value": "A" * 20}],
    }
    press = read_press(body)
    assert press is not None
    assert (press.approval_id, press.approve, press.user, press.channel) == (
        "A" * 20,
        False,
        "U1",
        "C1",
    )
    assert read_press({**body, "actions": [{"action_id": APPROVE_ACTION, "value": "x"}]}) is None
    assert read_press({**body, "actions": [{"action_id": "other", "value": "A" * 20}]}) is None


def test_doctor_names_a_surface_offering_a_waiting_tool_without_approvers(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(agent_dir, server_toml() + rule_toml("C0GENERAL", ["notes__*"]))
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "NOTES_CALLS": str(agent_dir / "calls.jsonl"),
        "NOTES_TOKEN": "t",
    }.items():
        monkeypatch.setenv(name, value)
    main(["doctor", "--config", str(agent_dir / "bot.toml")])
    [line] = [line for line in capsys.readouterr().out.splitlines() if " approvals " in line]
    assert line.startswith("FAIL")
    assert "notes__delete" in line
    assert "Fix:" in line
    write_config(
        agent_dir,
        server_toml()
        + rule_toml("C0GENERAL", ["notes__*"])
        + '\n[approvals]\napprovers = ["slack:U0BOB0001"]\n',
    )
    main(["doctor", "--config", str(agent_dir / "bot.toml")])
    [line] = [line for line in capsys.readouterr().out.splitlines() if " approvals " in line]
    assert line.startswith("ok")
