"""Webhooks over real HTTP on 127.0.0.1: auth, limits, 202 with a run id, and no turn on refusal."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.config import Secrets
from bot.ports import CronRunStatus, CronTrigger
from bot.turns import ConversationKind, ReplyRoute
from channels.cron import CronRunner, WebhookEndpoint, plan_hooks
from tests.channels.cron.doubles import MemoryRuns, RecordingDeliverer, ScriptedSink, Step
from tests.channels.cron.test_plan import SECRETS, hook, hooks_settings

TOKEN = SECRETS.get("HOOK_DEPLOY_TOKEN")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 1024


@dataclass
class Hooked:
    client: TestClient[web.Request, web.Application]
    endpoint: WebhookEndpoint
    sink: ScriptedSink
    runs: MemoryRuns
    deliverer: RecordingDeliverer


async def serve(secrets: Secrets = SECRETS, **hook_fields: object) -> Hooked:
    sink, runs, deliverer = ScriptedSink(), MemoryRuns(), RecordingDeliverer()
    plans = plan_hooks(hooks_settings(hook(**hook_fields)), secrets)
    runner = CronRunner(sink, lambda p: deliverer if p == "slack" else None, runs)
    endpoint = WebhookEndpoint(plans, runner, max_body_bytes=LIMIT, max_in_flight=2)
    app = web.Application()
    endpoint.install(app)
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    return Hooked(client, endpoint, sink, runs, deliverer)


@pytest.fixture
async def hooked() -> AsyncIterator[Hooked]:
    rig = await serve(notify="slack:C0123456789")
    yield rig
    await rig.endpoint.stop(grace=0)
    await rig.client.close()


async def test_an_authorized_call_answers_202_with_the_run_id_and_runs_the_turn(
    hooked: Hooked,
) -> None:
    response = await hooked.client.post("/hooks/deploy", data=b"v1.2 is live", headers=AUTH)
    assert response.status == 202
    body = await response.json()
    assert body["status"] == "accepted"
    await hooked.endpoint.idle()
    (request,) = hooked.sink.requests
    assert request.turn_id == body["run_id"]
    assert request.kind is ConversationKind.REQUEST
    assert request.channel == "webhook"
    assert request.conversation_key == "webhook:deploy"
    assert request.text == "A deploy finished. Summarize it:\nv1.2 is live"
    assert request.notifies is True
    assert request.route == ReplyRoute("slack", {"channel": "C0123456789"})
    assert request.speaker is None
    assert request.surface is None
    (record,) = hooked.runs.of("webhook:deploy")
    assert record.run_id == body["run_id"]
    assert record.trigger is CronTrigger.WEBHOOK
    assert record.status is CronRunStatus.OK
    assert record.delivered is True


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer "},
    ],
)
async def test_a_missing_or_wrong_token_gets_401_and_no_turn(
    hooked: Hooked, headers: dict[str, str]
) -> None:
    response = await hooked.client.post("/hooks/deploy", data=b"x", headers=headers)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert hooked.sink.requests == []
    assert hooked.runs.runs == {}


async def test_an_unknown_hook_gets_404(hooked: Hooked) -> None:
    response = await hooked.client.post("/hooks/other", data=b"x", headers=AUTH)
    assert response.status == 404
    assert hooked.sink.requests == []


async def test_only_post_is_served(hooked: Hooked) -> None:
    response = await hooked.client.get("/hooks/deploy", headers=AUTH)
    assert response.status == 405


async def test_a_body_over_the_limit_gets_413_and_no_turn(hooked: Hooked) -> None:
    response = await hooked.client.post("/hooks/deploy", data=b"x" * (LIMIT + 1), headers=AUTH)
    assert response.status == 413
    assert hooked.sink.requests == []


async def test_a_chunked_body_over_the_limit_gets_413(hooked: Hooked) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"y" * 400

    response = await hooked.client.post("/hooks/deploy", data=chunks(), headers=AUTH)
    assert response.status == 413
    assert hooked.sink.requests == []


async def test_a_body_exactly_at_the_limit_is_accepted(hooked: Hooked) -> None:
    response = await hooked.client.post("/hooks/deploy", data=b"z" * LIMIT, headers=AUTH)
    assert response.status == 202
    await hooked.endpoint.idle()
    assert hooked.sink.requests[0].text.endswith("z" * LIMIT)


async def test_a_body_that_is_not_utf8_gets_400(hooked: Hooked) -> None:
    response = await hooked.client.post("/hooks/deploy", data=b"\xff\xfe", headers=AUTH)
    assert response.status == 400
    assert hooked.sink.requests == []


async def test_too_many_runs_in_flight_get_429(hooked: Hooked) -> None:
    release = asyncio.Event()
    hooked.sink.script = deque([Step(hold=release), Step(hold=release)])
    for _ in range(2):
        assert (await hooked.client.post("/hooks/deploy", data=b"a", headers=AUTH)).status == 202
    response = await hooked.client.post("/hooks/deploy", data=b"a", headers=AUTH)
    assert response.status == 429
    release.set()
    await hooked.endpoint.idle()
    assert len(hooked.sink.requests) == 2


async def test_after_stop_calls_get_503(hooked: Hooked) -> None:
    await hooked.endpoint.stop()
    response = await hooked.client.post("/hooks/deploy", data=b"a", headers=AUTH)
    assert response.status == 503


async def test_neither_token_nor_body_reaches_the_logs(
    hooked: Hooked, capsys: pytest.CaptureFixture[str]
) -> None:
    await hooked.client.post("/hooks/deploy", data=b"secret-payload-123", headers=AUTH)
    await hooked.client.post("/hooks/deploy", data=b"x", headers={"Authorization": "Bearer nope"})
    await hooked.endpoint.idle()
    out = capsys.readouterr()
    assert TOKEN is not None
    assert TOKEN not in out.out + out.err
    assert "secret-payload-123" not in out.out + out.err
    assert "nope" not in out.out + out.err


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(offered=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40))
async def test_no_other_token_is_accepted(hooked: Hooked, offered: str) -> None:
    if offered == TOKEN:
        return
    response = await hooked.client.post(
        "/hooks/deploy", data=b"x", headers={"Authorization": f"Bearer {offered}"}
    )
    assert response.status == 401
    assert hooked.sink.requests == []


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(size=st.integers(0, 3 * LIMIT), chunked=st.booleans())
async def test_a_body_is_accepted_exactly_when_it_fits(
    hooked: Hooked, size: int, chunked: bool
) -> None:
    payload = b"b" * size

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, size, 300):
            yield payload[start : start + 300]

    data = chunks() if chunked else payload
    response = await hooked.client.post("/hooks/deploy", data=data, headers=AUTH)
    assert response.status == (202 if size <= LIMIT else 413)
    await hooked.endpoint.idle()
