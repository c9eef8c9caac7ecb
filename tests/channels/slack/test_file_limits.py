"""Files that used to make requests the API refuses, end to end through the fakes, with the API's
limits enforced by the fake (5 MB of base64 and 8,000 px per image, 32 MB per request): every
request the host sends is accepted, and the next message of each conversation is answered. And no
poison turns: content the API refuses for what it is (the fake's rule; the host could not know)
is left out, the person is told in one line, and the conversation goes on."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from bot.cli.compose import App
from tests.attachments import files
from tests.channels.slack.conftest import ALICE, DM, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import MAX_REQUEST_BYTES, FakeAnthropic
from tests.fakes.slack import FakeSlack

MB = 1024 * 1024


def _config(make_config: MakeConfig, slack: FakeSlack) -> Any:
    return make_config(f'files_url = "{slack.files_url}"\n')


def _media(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        for block in message["content"]
        if block["type"] in ("image", "document")
    ]


def _all_accepted(claude: FakeAnthropic) -> None:
    """Every request the host sent was answered (the fake refuses what the API refuses)."""
    assert len(claude.usages) == len(claude.requests)
    assert max(claude.request_bytes) <= MAX_REQUEST_BYTES


@pytest.mark.parametrize(
    ("name", "media_type", "make"),
    [
        ("cat.gif", "image/gif", lambda: files.animated_gif(int(8.6 * MB))),
        ("tiny.png", "image/png", lambda: files.png_with_private_chunk(8 * MB)),
        ("scan.png", "image/png", lambda: files.png16(1500, 700)),
    ],
)
async def test_an_image_over_the_apis_5_mb_is_sent_within_it_and_the_next_turn_answers(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    name: str,
    media_type: str,
    make: Callable[[], bytes],
) -> None:
    data = make()
    assert len(data) > 8 * MB
    shared = slack.add_file(name, data, media_type)
    claude.script("A picture.", "Still a picture.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "what is this?", files=[shared]))
        await send(slack, app, slack.dm(DM, ALICE, "and now?"))
    _all_accepted(claude)
    first, second = claude.requests
    [image] = _media(first)
    assert len(image["source"]["data"]) <= 5 * MB
    assert _media(second) == [image]  # replayed from history, the same bytes
    assert [post["text"] for post in slack.posts] == ["A picture.", "Still a picture."]


async def test_three_12_mb_pdfs_fit_the_request_and_the_person_hears_which_were_left_out(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    reports = [files.padded_pdf(12 * MB + n) for n in range(3)]  # three different files
    shared = [
        slack.add_file(f"report-{n + 1}.pdf", data, "application/pdf")
        for n, data in enumerate(reports)
    ]
    claude.script("Read the third.", "Still here.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "compare these", files=shared))
        await send(slack, app, slack.dm(DM, ALICE, "and now?"))
    _all_accepted(claude)
    first, second = claude.requests
    kept = base64.b64encode(reports[2]).decode("ascii")
    assert [block["source"]["data"] for block in _media(first)] == [kept]  # oldest left out
    text = first["messages"][-1]["content"][0]["text"]
    for n in (1, 2, 3):  # every file keeps its marker
        assert f"[attachment {n}: report-{n}.pdf, PDF, 1 page, 12.0 MB]" in text
    notes = [b["text"] for b in first["messages"][-1]["content"] if b["type"] == "text"][1:]
    assert len(notes) == 2
    assert all("size limit" in note for note in notes)
    reason = "with the other files it would make the request larger than the model accepts"
    assert slack.posts[0]["text"] == (
        f"I couldn't read “report-1.pdf”: {reason} (32 MB), so it was left out.\n"
        f"I couldn't read “report-2.pdf”: {reason} (32 MB), so it was left out.\n\n"
        "Read the third."
    )
    assert [block["source"]["data"] for block in _media(second)] == [kept]
    assert slack.posts[1]["text"] == "Still here."


async def test_content_the_api_refuses_is_dropped_and_the_conversation_goes_on(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    bad = files.png(40, 30)  # kept byte for byte, so the fake's rule can name it
    good = files.png(50, 20)
    claude.refuse_media(lambda data: data == bad)
    shared = [
        slack.add_file("fine.png", good, "image/png"),
        slack.add_file("odd.png", bad, "image/png"),
    ]
    claude.script("One picture.", "Answered.", "Still answered.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "look", files=shared))
        await send(slack, app, slack.dm(DM, ALICE, "next question"))
        await send(slack, app, slack.dm(DM, ALICE, "and another"))
    refused, first, second, third = claude.requests
    assert len(claude.usages) == 3  # the refusal, then three answers
    assert len(_media(refused)) == 2
    good_data = base64.b64encode(good).decode("ascii")
    for body in (first, second, third):  # never sent again, the other file still is
        assert [block["source"]["data"] for block in _media(body)] == [good_data]
    assert "could not process it" in first["messages"][-1]["content"][-1]["text"]
    assert [post["text"] for post in slack.posts] == [
        "I couldn't read “odd.png”: the model could not process it, so it is left out of this "
        "conversation.\n\nOne picture.",
        "Answered.",
        "Still answered.",
    ]
    later = second["messages"][0]["content"][0]["text"]
    assert "odd.png" in later
    assert "not read: the model could not process it" in later


async def test_a_refusal_naming_no_block_drops_the_media_and_answers(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    shared = [slack.add_file("chart.png", files.png(30, 30), "image/png")]
    claude.fail(400, body="messages: the request could not be processed")
    claude.script("Seen.", "Again.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "see", files=shared))
        await send(slack, app, slack.dm(DM, ALICE, "again"))
    refused, first, second = claude.requests
    assert len(_media(refused)) == 1
    assert _media(first) == []
    assert _media(second) == []
    assert slack.posts[0]["text"].startswith("I couldn't read “chart.png”: the model could not")
    assert slack.posts[1]["text"] == "Again."


async def test_a_replayed_file_the_api_now_refuses_is_forgotten_and_named_once(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # A conversation poisoned earlier (a file stored and replayed that the API refuses): it
    # recovers by itself on its next message.
    shot = files.png(40, 30)
    shared = [slack.add_file("old.png", shot, "image/png")]
    claude.script("Seen.", "Answered without it.", "Still fine.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "look", files=shared))
        claude.refuse_media(lambda data: data == shot)
        await send(slack, app, slack.dm(DM, ALICE, "what about now?"))
        await send(slack, app, slack.dm(DM, ALICE, "and now?"))
    first, refused, second, third = claude.requests
    assert len(_media(first)) == len(_media(refused)) == 1
    assert _media(second) == []
    assert _media(third) == []
    assert len(claude.usages) == 3
    assert [post["text"] for post in slack.posts] == [
        "Seen.",
        "I couldn't read “old.png”: the model could not process it, so it is left out of this "
        "conversation.\n\nAnswered without it.",
        "Still fine.",
    ]
