"""/healthz and /metrics on the host's HTTP port while Slack runs in Socket Mode."""

from __future__ import annotations

import aiohttp

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack


def _metric(text: str, line_start: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith(line_start)]
    return float(line.rsplit(" ", 1)[1])


async def test_health_and_metrics_follow_turns_and_the_connection(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("on it")
    config = make_config(BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    async with App(config) as app, aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{app.http_port}"
        async with http.get(f"{base}/healthz") as reply:
            assert reply.status == 200
            assert await reply.json() == {"ok": True, "channels": {"slack": True}}

        await send(slack, app, slack.mention(GENERAL, ALICE, "status please"))
        async with http.get(f"{base}/metrics") as reply:
            assert reply.status == 200
            metrics = await reply.text()
        assert _metric(metrics, 'bot_turns_total{channel="slack",outcome="ok"}') == 1.0
        assert _metric(metrics, 'bot_deliveries_total{channel="slack",result="delivered"}') == 1.0
        assert _metric(metrics, 'bot_model_tokens_total{kind="input"}') > 0
        assert _metric(metrics, 'bot_turn_latency_seconds_count{channel="slack"}') == 1.0
        assert _metric(metrics, "bot_lane_queue_depth") == 0.0
        assert _metric(metrics, 'bot_channel_up{channel="slack"}') == 1.0

        await slack_channel(app).stop()
        async with http.get(f"{base}/healthz") as reply:
            assert reply.status == 503
            assert (await reply.json())["channels"] == {"slack": False}
