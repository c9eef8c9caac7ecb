"""What the model writes is neutralized on every path (SPEC §11, issue 25).

Hostile answers (broadcast and user pings, Slack's own link syntax, links whose text names
another address, Telegram `tg://` mentions and join links, cut anywhere into deltas) go through
the real deliverers and live sessions against the fake Slack and Telegram servers: streamed
(Slack `chat.startStream`/`appendStream`/`stopStream`, Telegram drafts), edited (`chat.update`,
`editMessageText`), posted and finished. Then every call the fakes recorded is read as the
platform would show it, and none may carry a live ping, a `tg://` link or a misleading link.
"""

from __future__ import annotations

import asyncio
import html
import re
import ssl
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient
from telegram import Bot
from telegram.request import HTTPXRequest

from bot.ports.delivery import LiveSession, LiveView
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute
from channels.slack.deliver import SlackDeliverer
from channels.telegram.deliver import Target, TelegramDeliverer, route_for
from tests.channels.slack.conftest import ALICE, DM, GENERAL
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

HOSTS = ("good.example", "evil.example", "bank.example")
PINGS = (
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U0ALICE01>",
    "<!subteam^S0TEAM|@team>",
    "<!channel|channel>",
    "<@W123|alice>",
)
WORDS = ("hello", "**bold**", "_it_", "`code`", "- item", "1. first", "> quote", "\n", "\n\n")


@st.composite
def addresses(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(HOSTS))
    scheme = draw(st.sampled_from(("https://", "http://", "", "HTTPS://")))
    path = draw(st.sampled_from(("", "/", "/login", "/a/b?c=d")))
    return f"{scheme}{host}{path}"


@st.composite
def hostile_pieces(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return draw(st.sampled_from(PINGS))
    if kind == 1:
        label, target = draw(addresses()), draw(addresses())
        return f"[{label}](https://{target.split('://')[-1]})"
    if kind == 2:
        label, target = draw(addresses()), draw(addresses())
        return f"<https://{target.split('://')[-1]}|{label}>"
    if kind == 3:
        user = draw(st.integers(1, 10**12))
        return draw(st.sampled_from((f"[Pavel](tg://user?id={user})", f"tg://user?id={user}")))
    if kind == 4:
        return draw(st.sampled_from(("[join](tg://join?invite=AbC)", "TG://join?invite=x")))
    if kind == 5:
        return f"`{draw(st.sampled_from(PINGS))}`"
    if kind == 6:
        return f"[click {draw(addresses())} now](https://{draw(st.sampled_from(HOSTS))}/x)"
    return draw(st.sampled_from(WORDS))


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, list[int]]:
    pieces = draw(st.lists(hostile_pieces(), min_size=1, max_size=12))
    text = " ".join(pieces) + " done."
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=6))))
    return text, cuts


# --- what a reader would see ----------------------------------------------------------------------

_SLACK_LINK = re.compile(r"<([a-zA-Z][\w+.-]*:[^|>]*)\|([^>]*)>")
_MD_LINK = re.compile(r"\[([^\[\]]*)\]\(([^()\s]*)\)")
_HTML_LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.DOTALL)


def _named_hosts(visible: str) -> set[str]:
    return {host for host in HOSTS if host in visible.lower()}


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0].lower()


def _misleads(label: str, url: str) -> bool:
    named = _named_hosts(label)
    return bool(named) and named != {_host_of(url)}


def slack_faults(text: str) -> list[str]:
    faults = []
    for ping in ("<!channel", "<!here", "<!everyone", "<@", "<!subteam", "<#"):
        if ping in text.lower():
            faults.append(f"live {ping}")
    for url, label in _SLACK_LINK.findall(text):
        if _misleads(html.unescape(label), html.unescape(url)):
            faults.append(f"<{url}|{label}>")
    for label, url in _MD_LINK.findall(text):
        if _misleads(label, url):
            faults.append(f"[{label}]({url})")
    return faults


def telegram_faults(text: str, parse_mode: str | None) -> list[str]:
    faults = []
    links = _HTML_LINK.findall(text) if parse_mode == "HTML" else []
    for href, label in links:
        href = html.unescape(href)
        if href.lower().startswith("tg:"):
            faults.append(f"live {href}")
        if _misleads(html.unescape(re.sub(r"<[^>]*>", "", label)), href):
            faults.append(f"{label} -> {href}")
    visible = html.unescape(re.sub(r"<[^>]*>", "", text)) if parse_mode == "HTML" else text
    if "tg://" in visible.lower():
        faults.append("a tg:// address Telegram would link")
    return faults


# --- Slack ------------------------------------------------------------------------------------


async def _no_sleep(seconds: float) -> None:
    return None


def _prefixes(text: str, cuts: Sequence[int]) -> list[str]:
    return [text[:cut] for cut in cuts if text[:cut].strip()] + [text]


def _renderer(
    deliverer: SlackDeliverer | TelegramDeliverer, route: ReplyRoute
) -> Callable[[str], list[str]]:
    return lambda text: deliverer.render(route, text)


async def _stream(
    session: LiveSession, render: Callable[[str], list[str]], prefixes: list[str]
) -> str | None:
    """Open, show each prefix, seal: what `bot.host.streaming` does, one step per delta. Like it, a
    prefix that renders to nothing visible (a bare `>`) opens and shows nothing."""
    prefixes = [prefix for prefix in prefixes if render(prefix)]
    if not prefixes:
        return None
    first = prefixes[0]
    platform_id = await session.open(0, None, LiveView(render(first)[0], first))
    for prefix in prefixes[1:]:
        await session.show(0, platform_id, LiveView(render(prefix)[0], prefix))
    return await session.seal(0, platform_id, LiveView(render(prefixes[-1])[0], prefixes[-1]))


async def _slack_answer(text: str, cuts: list[int]) -> FakeSlack:
    async with FakeSlack() as slack:
        slack.add_user(ALICE, "alice")
        slack.add_channel(GENERAL, "general")
        slack.add_channel(DM, kind="im")
        thread = slack.say(GENERAL, ALICE, "hi <@BOT>")["ts"]
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        threaded = ReplyRoute(
            "slack",
            {
                "channel": GENERAL,
                "thread_ts": thread,
                "message_ts": thread,
                "user": ALICE,
                "team": "T0TEAM",
            },
        )
        top = ReplyRoute("slack", {"channel": DM, "thread_ts": None, "message_ts": None})
        for route, mode in ((threaded, "native"), (top, "edits")):
            deliverer = SlackDeliverer(client, sleep=_no_sleep, stream=mode, stream_interval=0)
            session = deliverer.live(route, f"turn-{mode}")
            assert session is not None
            render = _renderer(deliverer, route)
            ts = await _stream(session, render, _prefixes(text, cuts))
            turn = f"turn-{mode}"
            part = OutboxPart(f"{turn}.0", turn, "k", 0, route, render(text)[0], ts)
            await deliverer.finish(part, None)
            await deliverer.post_text(
                route, text, notice_id="n"
            )  # and the same answer posted whole
        return slack


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers())
def test_no_slack_call_carries_a_ping_or_a_misleading_link(answer: tuple[str, list[int]]) -> None:
    text, cuts = answer
    slack = asyncio.run(_slack_answer(text, cuts))
    streams: dict[str, str] = {}
    methods = set()
    for call in slack.calls:
        methods.add(call.method)
        shown = call.params.get("markdown_text") or call.params.get("text") or ""
        if call.method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            ts = str(call.params.get("ts") or f"start-{len(streams)}")
            streams[ts] = streams.get(ts, "") + str(shown)  # Slack shows the pieces joined
        assert not slack_faults(str(shown)), (call.method, shown)
    for message in slack.messages[GENERAL] + slack.messages[DM]:
        if message.get("user") == BOT_USER:
            assert not slack_faults(str(message["text"])), message["text"]
    assert {"chat.startStream", "chat.stopStream", "chat.postMessage", "chat.update"} <= methods


# --- Telegram ---------------------------------------------------------------------------------


# One TLS context for every example's Bot, as the channel passes its own (`tls`): by default
# PTB builds two per Bot, each loading the CA bundle (tens of ms of CPU per example). The fake
# speaks plain HTTP, so the context is built, never used.
_TLS = ssl.create_default_context()


async def _telegram_answer(text: str, cuts: list[int]) -> FakeTelegram:
    async with FakeTelegram() as tg:
        alice = tg.user("Alice", user_id=4242)
        private = route_for(Target(tg.private_chat(alice)["id"]))
        group = route_for(Target(tg.supergroup(-100777, "Team")["id"]))
        tls = {"verify": _TLS}
        bot = Bot(
            tg.token,
            base_url=tg.base_url,
            request=HTTPXRequest(httpx_kwargs=tls),
            get_updates_request=HTTPXRequest(connection_pool_size=1, httpx_kwargs=tls),
        )
        await bot.initialize()
        try:
            deliverer = TelegramDeliverer(bot, sleep=_no_sleep, stream_interval=0)
            for route in (private, group):
                session = deliverer.live(route, "turn-1")
                assert session is not None
                render = _renderer(deliverer, route)
                message = await _stream(session, render, _prefixes(text, cuts))
                part = OutboxPart("turn-1.0", "turn-1", "k", 0, route, render(text)[0], message)
                if message is None:
                    await deliverer.post(part, None)  # a draft's last part is sent by delivery
                else:
                    await deliverer.finish(part, None)
            await deliverer.post_text(group, text, notice_id="n")
        finally:
            await bot.shutdown()
        return tg


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers())
def test_no_telegram_call_carries_a_tg_link_or_a_misleading_link(
    answer: tuple[str, list[int]],
) -> None:
    text, cuts = answer
    tg = asyncio.run(_telegram_answer(text, cuts))
    methods = set()
    for call in tg.calls:
        methods.add(call.method)
        shown = str(call.params.get("text") or "")
        mode = call.params.get("parse_mode")
        assert not telegram_faults(shown, str(mode) if mode else None), (call.method, shown)
    assert {"sendMessageDraft", "sendMessage", "editMessageText"} <= methods


def test_the_checks_see_what_they_look_for() -> None:
    """The readers above catch the faults the deliverers must never let through."""
    assert slack_faults("hi <!here> all")
    assert slack_faults("<https://evil.example/x|https://good.example>")
    assert slack_faults("[good.example](https://evil.example)")
    assert not slack_faults("<https://good.example/login|good.example> and &lt;!here&gt;")
    assert telegram_faults('<a href="tg://user?id=1">P</a>', "HTML")
    assert telegram_faults('<a href="https://evil.example">good.example</a>', "HTML")
    assert telegram_faults("see tg://join?invite=x", None)
    assert not telegram_faults('<a href="https://good.example/a">good.example</a>', "HTML")
