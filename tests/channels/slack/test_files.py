"""Slack files end to end: real files shared on mentions and DMs, downloaded from the fake Slack
with the bot token, read, and sent to the fake Anthropic API as image and document blocks; bad
files get one line each and the message is still answered."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.compose import App
from tests.attachments import files
from tests.channels.slack.conftest import ALICE, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack

MB = 1024 * 1024


def _config(make_config: MakeConfig, slack: FakeSlack, extra: str = "") -> Any:
    return make_config(f'files_url = "{slack.files_url}"\n\n{extra}')


def _user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = body["messages"][-1]["content"]
    return content


async def test_a_screenshot_in_a_thread_mention_reaches_the_model_as_an_image(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    shot = slack.add_file("screenshot.png", files.png(320, 200), "image/png")
    claude.script("A red rectangle.", "Still red.")
    async with App(_config(make_config, slack)) as app:
        root = slack.mention(GENERAL, ALICE, "what is this?", files=[shot])
        await send(slack, app, root)
        ts = root["event"]["ts"]
        await send(slack, app, slack.mention(GENERAL, ALICE, "and now?", thread_ts=ts))
        history = await app.store.history.load(f"slack:{TEAM}:{GENERAL}:{ts}")
    first, second = claude.requests
    content = _user_content(first)
    assert [b["type"] for b in content] == ["text", "image"]
    assert "[attachment 1: screenshot.png, PNG image, 320×200 px, " in content[0]["text"]
    assert content[1]["source"]["media_type"] == "image/png"
    assert slack.downloads == [shot["id"]]  # once: the second turn replays it from the store
    # The second turn replays the image from history, byte for byte.
    replayed = [b for b in second["messages"][0]["content"] if b["type"] == "image"]
    assert replayed[0]["source"] == content[1]["source"]
    assert [post["text"] for post in slack.posts] == ["A red rectangle.", "Still red."]
    # Neither the request nor the stored history holds the file URL.
    for text in (json.dumps(claude.requests), repr(history)):
        assert shot["url_private"] not in text
        assert "files-pri" not in text


async def test_a_dm_with_good_and_bad_files_answers_with_one_line_per_bad_file(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    shared = [
        slack.add_file("report.pdf", files.pdf(3), "application/pdf"),
        slack.add_file("data.csv", files.csv(10), "text/csv"),
        slack.add_file("cut.png", files.truncated_png(), "image/png"),
        slack.add_file("huge.bin", files.big_file(30 * MB), "application/octet-stream"),
        slack.add_file("photo.jpg", files.jpeg(80, 40, orientation=6), "image/jpeg"),
    ]
    claude.script("Read them.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "here are my files", files=shared))
    [request] = claude.requests
    content = _user_content(request)
    assert [b["type"] for b in content] == ["text", "document", "text", "image"]
    text = content[0]["text"]
    assert "[attachment 1: report.pdf, PDF, 3 pages, " in text
    assert "[attachment 3: cut.png, image/png, " in text
    assert "not read: the image could not be decoded" in text
    assert (
        "[attachment 4: huge.bin, application/octet-stream, 30.0 MB, not read: it is larger" in text
    )
    assert "[attachment 5: photo.jpg, JPEG image, 40×80 px, " in text  # turned upright
    assert content[2]["text"].startswith('<attachment index="2">\ncity,temperature\n')
    # Not downloaded: over the cap by its declared size.
    assert shared[3]["id"] not in slack.downloads
    [post] = slack.posts  # the lines about bad files lead the answer
    assert post["text"].splitlines() == [
        "I couldn't read “cut.png”: the image could not be decoded (damaged or cut short).",
        "I couldn't read “huge.bin”: it is larger than the 20.0 MB limit.",
        "",
        "Read them.",
    ]


async def test_a_token_without_files_read_gets_a_clear_refusal(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.revoke("files:read")
    shot = slack.add_file("shot.png", files.png(), "image/png")
    claude.script("No picture, sorry.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "", files=[shot]))
    [request] = claude.requests
    assert [b["type"] for b in _user_content(request)] == ["text"]
    assert "not read: the platform refused the download" in _user_content(request)[0]["text"]
    assert slack.posts[0]["text"] == (
        "I couldn't read “shot.png”: the platform refused the download.\n\nNo picture, sorry."
    )


async def test_a_file_url_off_the_platform_is_never_fetched(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    shot = slack.add_file("shot.png", files.png(), "image/png")
    # Slack's own host in production; the fake's in this config: anything else is refused.
    shot = {**shot, "url_private": "http://127.0.0.1:9/steal", "url_private_download": None}
    async with App(make_config()) as app:  # files_url stays https://files.slack.com/
        await send(slack, app, slack.dm(DM, ALICE, "look", files=[shot]))
    assert slack.downloads == []
    assert "refused" in slack.posts[0]["text"]


async def test_a_file_bigger_than_declared_is_cut_off_at_the_cap_while_downloading(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    dump = slack.add_file("dump.log", files.big_file(30 * MB), "text/plain")
    lying = {**dump, "size": 100}  # the event declares 100 bytes; the server sends 30 MB
    claude.script("ok")
    config = _config(make_config, slack, "[attachments]\nmax_bytes = 1048576\n")
    async with App(config) as app:
        await send(slack, app, slack.dm(DM, ALICE, "the log", files=[lying]))
    assert slack.downloads == [dump["id"]]  # the download was tried, and stopped
    assert slack.posts[0]["text"] == (
        "I couldn't read “dump.log”: it is larger than the 1.0 MB limit.\n\nok"
    )
