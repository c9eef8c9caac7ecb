"""The console in a real browser (SPEC §18): headless Chromium driven by Playwright against a real
`bot run` with the fakes. Sign-in refused then accepted; a conversation shows its Slack thread
with its speakers; an approval decided in the console runs the tool once and updates the Slack
card; the usage chart's totals equal `bot usage`; a change posted without its CSRF token is
refused; screenshots of the pages are kept in test-artifacts/console/."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.console.browser import (
    ALICE,
    BOB,
    GENERAL,
    HOSTILE_NAME,
    World,
    require_chromium,
    shoot,
    signed_in,
    world,
)
from tests.fakes.anthropic import Reply, ToolCall
from tests.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bot_world(
    bot_command: list[str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    require_chromium()
    async with world(bot_command, tmp_path_factory.mktemp("console")) as shared:
        yield shared


async def test_sign_in_is_refused_with_a_wrong_password_then_accepted(bot_world: World) -> None:
    context = await bot_world.browser.new_context()
    page = await context.new_page()
    await page.goto(bot_world.base + "/conversations")
    assert page.url.startswith(bot_world.base + "/login?next=")
    await page.fill("#username", "ada")
    await page.fill("#password", "not the password")
    await page.click("button[type=submit]")
    assert "Wrong name or password" in await page.inner_text("#login-error")
    await shoot(page, "login-refused")
    await page.fill("#password", "correct horse battery staple")
    await page.click("button[type=submit]")
    await page.wait_for_selector("h1:text('Conversations')")
    assert page.url == bot_world.base + "/conversations"
    [cookie] = [c for c in await context.cookies() if c["name"] == "bot_console"]
    assert (cookie["secure"], cookie["httpOnly"], cookie["sameSite"]) == (True, True, "Strict")
    await context.close()


async def test_a_conversation_shows_its_slack_thread_with_its_speakers(bot_world: World) -> None:
    slack, claude = bot_world.slack, bot_world.claude
    claude.script("The <b>plan</b> is ready.")
    await slack.push(slack.mention(GENERAL, ALICE, "what is the plan?"))
    await until(lambda: any("is ready" in post["text"] for post in slack.posts), within=30)
    page = await signed_in(bot_world)
    await page.goto(bot_world.base + "/conversations")
    await shoot(page, "conversations")
    await page.click(f"a:text-matches('slack:.*{GENERAL}')")
    await page.wait_for_selector("h1:text('Conversation')")
    # A hostile display name and the model's markup are shown as text, never as elements.
    assert HOSTILE_NAME in await page.inner_text(".message .who >> nth=0")
    texts = await page.locator(".message .text").all_inner_texts()
    assert any("what is the plan?" in text for text in texts), texts
    assert any("The <b>plan</b> is ready." in text for text in texts)
    assert await page.locator("main img, main b, main script").count() == 0
    await shoot(page, "conversation")
    await page.click("td a[href*='/turns/']")
    await page.wait_for_selector("text=The request as sent")
    assert "sk-ant-test-key" not in await page.content()
    await shoot(page, "turn")
    await page.context.close()


async def test_a_change_posted_without_its_csrf_token_is_refused(bot_world: World) -> None:
    page = await signed_in(bot_world)
    await page.goto(bot_world.base + "/conversations")
    await page.click(f"a:text-matches('slack:.*{GENERAL}')")
    await page.wait_for_selector("text=Reset this conversation")
    await page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
    await page.click("text=Reset this conversation")
    await page.wait_for_selector("h1:text('Stale form')")
    assert "Nothing was changed" in await page.content()
    await shoot(page, "stale-form")
    await page.goto(bot_world.base + "/conversations")
    assert await page.locator(f"a:text-matches('slack:.*{GENERAL}')").count() == 1
    await page.context.close()


async def test_every_page_is_drawn_and_kept_as_a_screenshot(bot_world: World) -> None:
    page = await signed_in(bot_world)
    origin = bot_world.base.removesuffix("/console")
    for href in [await a.get_attribute("href") for a in await page.locator("nav.pages a").all()]:
        await page.goto(origin + href)
        assert await page.locator("h1").count() == 1, href
        await shoot(page, "page-" + (href.removeprefix("/console/") or "overview"))
    await page.set_viewport_size({"width": 390, "height": 800})
    await page.goto(bot_world.base + "/")
    await shoot(page, "overview-phone")
    await page.context.close()


async def test_an_approval_decided_in_the_console_runs_the_tool_once_and_updates_the_card(
    bot_world: World,
) -> None:
    slack, claude, calls = bot_world.slack, bot_world.claude, bot_world.calls
    claude.script(
        Reply(tool_calls=[ToolCall("notes__delete", {"text": "the <b>milk</b> note"})]),
        "It waits for an approval.",
        "Deleted the milk note.",
    )
    await slack.push(slack.mention(GENERAL, ALICE, "delete the milk note"))
    await until(lambda: any(post["blocks"] for post in slack.posts), within=30)
    [card] = [post for post in slack.posts if post["blocks"]]
    page = await signed_in(bot_world)
    await page.goto(bot_world.base + "/approvals")
    assert "the <b>milk</b> note" in await page.inner_text("#pending-title + article pre")
    await shoot(page, "approvals-waiting")
    await page.click("button:text('Approve')")
    await page.wait_for_selector("#approval-notice")
    await until(lambda: any(p["text"] == "Deleted the milk note." for p in slack.posts), within=30)
    assert calls.tools() == ["delete"]
    closed = next(post for post in slack.posts if post["ts"] == card["ts"])
    assert f"approved by slack:{BOB}" in closed["text"]
    assert not closed["blocks"] or all(b["type"] != "actions" for b in closed["blocks"])
    await page.goto(bot_world.base + "/approvals")
    assert "Nothing waits for a decision." in await page.content()
    await shoot(page, "approvals-decided")
    await page.goto(bot_world.base + "/audit")
    assert "approve" in await page.inner_text("table")
    await page.context.close()


async def _bot_usage(bot_command: list[str], world: World) -> list[dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(
        *bot_command,
        "--config",
        str(world.config),
        "usage",
        "--json",
        env=world.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    lines: list[dict[str, Any]] = json.loads(out)
    return lines


async def test_the_usage_charts_totals_equal_bot_usage(
    bot_world: World, bot_command: list[str]
) -> None:
    slack, claude = bot_world.slack, bot_world.claude
    claude.script("Counted.")
    await slack.push(slack.mention(GENERAL, ALICE, "count this turn"))
    await until(lambda: any(post["text"] == "Counted." for post in slack.posts), within=30)
    async with asyncio.timeout(30):
        while not (lines := await _bot_usage(bot_command, bot_world))[-1]["turns"]:
            await asyncio.sleep(0.1)
    total = lines[-1]
    page = await signed_in(bot_world)
    await page.goto(bot_world.base + "/usage")
    spend = await page.get_attribute("svg.chart >> nth=0", "data-total")
    tokens = await page.get_attribute("svg.chart >> nth=1", "data-total")
    assert round(float(spend or 0), 6) == total["cost_usd"]
    assert float(tokens or 0) == sum(
        total[k]
        for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    )
    assert await page.inner_text("#usage-total-usd") == f"${total['cost_usd']:.4f}"
    await shoot(page, "usage")
    await page.context.close()


async def test_the_overview_and_a_conversation_update_without_a_reload(bot_world: World) -> None:
    slack, claude = bot_world.slack, bot_world.claude
    claude.script("First answer.", "Second answer.")
    mention = slack.mention(GENERAL, ALICE, "start a live thread")
    await slack.push(mention)
    await until(lambda: any(post["text"] == "First answer." for post in slack.posts), within=30)
    page = await signed_in(bot_world)
    overview = await page.context.new_page()
    await overview.goto(bot_world.base + "/")
    before = await overview.inner_text("#turns-hour")
    await page.goto(bot_world.base + "/conversations")
    thread = mention["event"]["ts"]
    await page.click(f"a:text-matches('{thread.replace('.', '[.]')}$')")
    await page.wait_for_selector("text=First answer.")
    await slack.push(slack.mention(GENERAL, ALICE, "and once more", thread_ts=thread))
    # Neither page is reloaded: their live part is refreshed from the store.
    await page.wait_for_selector("text=Second answer.", timeout=30_000)
    await overview.wait_for_function(
        f"document.querySelector('#turns-hour').textContent.trim() !== '{before}'",
        timeout=30_000,
    )
    await page.context.close()
