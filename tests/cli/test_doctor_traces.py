"""`bot doctor` on `[otel]` (SPEC §17): traces off, or where they go and whether the `otel` extra
that exports them is installed; never a credential from the endpoint or a header value."""

from __future__ import annotations

import string
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bot import tracing
from bot.cli.compose import App, Runs
from bot.cli.doctor import Check, diagnose
from bot.cli.settings import load_config
from tests.conftest import write_config

ENDPOINT = "https://collector:s3cret-pass@otel.example.com:4318/tenant?api-key=k3y-in-query"
HEADER_VALUE = "Authorization=Bearer hdr-t0ken-value"


async def traces(agent_dir: Path, extra: str) -> Check:
    write_config(agent_dir, extra)
    checks = await diagnose(agent_dir / "bot.toml", offline=True)
    [check] = [check for check in checks if check.name == "traces"]
    return check


async def test_without_an_endpoint_traces_are_off(agent_dir: Path) -> None:
    check = await traces(agent_dir, "")
    assert check.ok
    assert check.detail.startswith("off")
    assert "otel.endpoint" in check.detail


async def test_an_endpoint_is_shown_without_its_credentials_nor_header_values(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", HEADER_VALUE)
    check = await traces(agent_dir, f'[otel]\nendpoint = "{ENDPOINT}"\nservice_name = "quill"\n')
    assert check.ok
    assert "https://otel.example.com:4318/tenant/v1/traces" in check.detail
    assert "otel extra installed" in check.detail
    assert "'quill'" in check.detail
    assert "OTEL_EXPORTER_OTLP_HEADERS" in check.detail  # named, its value never shown
    for secret in ("s3cret-pass", "collector", "k3y-in-query", "hdr-t0ken-value", "Bearer"):
        assert secret not in check.detail


async def test_an_endpoint_without_the_extra_fails_with_the_fix(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a machine that never installed the extra: `bot run` refuses to start there.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    check = await traces(agent_dir, f'[otel]\nendpoint = "{ENDPOINT}"\n')
    assert not check.ok
    assert "not installed" in check.detail
    assert "Fix: pip install -e '.[otel]'" in check.detail
    assert "s3cret-pass" not in check.detail


async def test_the_host_logs_where_traces_go_without_the_endpoints_credentials(
    agent_dir: Path,
) -> None:
    write_config(agent_dir, f'[otel]\nendpoint = "{ENDPOINT}"\n')
    config = load_config(
        agent_dir / "bot.toml", env={"ANTHROPIC_API_KEY": "sk-ant-test-0123456789"}
    )
    with capture_logs() as logs:
        async with App(config, [], Runs(http=False, scheduler=False, resume=False)):
            pass
    [exporting] = [line for line in logs if line["event"] == "traces_exporting"]
    assert exporting["endpoint"] == "https://otel.example.com:4318/tenant"
    assert "s3cret-pass" not in str(logs)


@given(
    user=st.text(alphabet=string.ascii_letters + string.digits + "%-._~!$&'()*+,;=:", min_size=1),
    query=st.text(alphabet=string.ascii_letters + string.digits + "%-._~=&/?", min_size=1),
)
def test_a_shown_url_keeps_no_user_password_or_query(user: str, query: str) -> None:
    shown = tracing.shown_url(f"https://{user}@otel.example.com:4318/v1?{query}#{query}")
    assert shown == "https://otel.example.com:4318/v1"
