"""The stored form of a request's `Lookups`: its own field, round-tripped whole; and the form an
older version wrote (inside the route) read into it once, then written only the new way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.store.sql.request_codec import decode_request, encode_request
from bot.turns import ConversationKind, Lookups, ReplyRoute, Speaker, TurnRequest

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
an_id = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
maybe_id = st.none() | an_id
lookups = st.builds(
    Lookups,
    speaker=an_id,
    surface=an_id,
    text=text,
    message=an_id,
    thread=maybe_id,
    surface_type=maybe_id,
    speaker_name=maybe_id,
    viewing=maybe_id,
    bot_user=maybe_id,
    bot_author=maybe_id,
)
# What a route holds besides the old lookups (ids, flags, a session's title).
route_values = st.dictionaries(
    st.sampled_from(["team", "thread_ts", "files", "assistant", "session", "title"]),
    st.none() | st.booleans() | text | st.lists(text, max_size=2),
    max_size=4,
)


def request(route: ReplyRoute, found: Lookups | None = None) -> TurnRequest:
    return TurnRequest(
        conversation_key="slack:T1:C1:1.000100",
        kind=ConversationKind.PUSH,
        channel="slack",
        text="@someone look",
        received_at=T0,
        turn_id="t1",
        speaker=Speaker("someone"),
        route=route,
        lookups=found,
    )


@settings(max_examples=80, deadline=None)
@given(found=st.none() | lookups, values=route_values)
def test_lookups_round_trip_in_their_own_field(
    found: Lookups | None, values: dict[str, Any]
) -> None:
    original = request(ReplyRoute("slack", values), found)
    stored = encode_request(original)
    assert decode_request(stored) == original
    assert "lookup" not in json.loads(stored)["route"]["values"]


@settings(max_examples=80, deadline=None)
@given(found=lookups, values=route_values, event_type=st.sampled_from(["message", "app_mention"]))
def test_the_old_form_inside_the_route_is_read_into_lookups_and_written_anew(
    found: Lookups, values: dict[str, Any], event_type: str
) -> None:
    old_values: dict[str, Any] = {
        **values,
        "channel": found.surface,
        "message_ts": found.message,
        "user": found.speaker,
        "lookup": {  # as the old `pending_request` wrote it
            "text": found.text,
            "event_type": event_type,
            "channel_type": found.surface_type,
            "thread_ts": found.thread,
            "bot_name": found.speaker_name,
            "bot_user_id": found.bot_user,
            "bot_id": found.bot_author,
            "session": "session" in values,
        },
    }
    if found.viewing is not None:
        old_values["viewing"] = found.viewing
    old = encode_request(request(ReplyRoute("slack", old_values)))

    read = decode_request(old)

    # "" and None said the same in the old form: nothing there.
    assert read.lookups == Lookups(
        speaker=found.speaker,
        surface=found.surface,
        text=found.text,
        message=found.message,
        thread=found.thread or None,
        surface_type=found.surface_type or None,
        speaker_name=found.speaker_name or None,
        viewing=found.viewing or None,
        bot_user=found.bot_user or None,
        bot_author=found.bot_author or None,
    )
    assert read.route == ReplyRoute(
        "slack",
        {**values, "channel": found.surface, "message_ts": found.message, "user": found.speaker},
    )
    rewritten = encode_request(read)
    assert "lookup" not in json.loads(rewritten)["route"]["values"]
    assert decode_request(rewritten) == read


def test_an_old_form_without_the_ids_to_look_up_by_is_read_without_lookups() -> None:
    values = {"channel": "C1", "lookup": {"text": "<@U2> hi"}}  # no user, no message_ts
    read = decode_request(encode_request(request(ReplyRoute("slack", values))))
    assert read.lookups is None
    assert read.route == ReplyRoute("slack", {"channel": "C1"})
