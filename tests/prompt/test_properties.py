"""Whole-request properties over random untrusted input.

(a) No untrusted value (the person's text, speaker names, surface name, preceding messages,
    memory hits, stored history, attachment names and inlined file text) can add a line that
    opens or closes a host fence: the fence tags
    in the request are exactly the ones the host writes for the same structure.
(b) No hidden value (route values, the person key, a speaker's platform user id kept route-side)
    ever occurs in the serialized request.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.ports.memory import MemoryHit
from bot.prompt import Assembler, TokenCounter
from bot.prompt.fence import fence_forms
from bot.turns import (
    Attached,
    Attachment,
    AttachmentBlock,
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TextBlock,
    TurnRequest,
    Viewing,
)

from .builders import make_assembler, wire_body
from .strategies import untrusted_text

ASSEMBLER = make_assembler(TokenCounter())
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_TIMES = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


Turn = tuple[TurnRequest, list[HistoryEntry], list[MemoryHit], Attached]


@st.composite
def attached(draw: st.DrawFn) -> Attached:
    """Attachments with untrusted names; text files with untrusted content, inlined."""
    blocks = []
    contents: dict[str, bytes] = {}
    for index in range(1, draw(st.integers(0, 2)) + 1):
        kind = draw(st.sampled_from(["text", "pdf", "audio"]))
        content_id = f"{index:064x}" if kind == "text" else None
        problem = draw(st.one_of(st.none(), untrusted_text(1))) if kind == "pdf" else None
        name = draw(untrusted_text(2))
        blocks.append(AttachmentBlock(index, name, kind, "text/plain", 10, content_id, {}, problem))
        if content_id is not None:
            contents[content_id] = draw(untrusted_text()).encode("utf-8", "replace")
    return Attached(tuple(blocks), contents)


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    kind = draw(st.sampled_from(list(ConversationKind)))
    surface = None
    if kind is ConversationKind.PUSH:
        surface = Surface(
            draw(st.sampled_from(list(SurfaceKind))),
            draw(st.sampled_from(["C0A1B2C3D", "-100123", "D42"])),
            draw(untrusted_text(4)),
            draw(st.booleans()),
            draw(st.sampled_from([3800, 4096])),
        )
    preceding = draw(
        st.lists(
            st.builds(
                PrecedingMessage,
                at=_TIMES,
                name=untrusted_text(3),
                text=untrusted_text(),
                handle=st.one_of(st.none(), untrusted_text(2)),
            ),
            max_size=6,
        )
    )
    speaker = draw(
        st.one_of(
            st.none(),
            st.builds(Speaker, untrusted_text(3), st.one_of(st.none(), untrusted_text(2))),
        )
    )
    attachments = draw(
        st.lists(
            st.builds(Attachment, untrusted_text(2), untrusted_text(1), st.integers(0, 10**9)),
            max_size=2,
        )
    )
    request = TurnRequest(
        conversation_key=draw(st.sampled_from(["slack:T:C:1.2", "console:abc"])),
        kind=kind,
        channel=draw(st.sampled_from(["slack", "telegram", "console", "cron", "webhook"])),
        text=draw(untrusted_text()),
        received_at=draw(_TIMES),
        turn_id="t",
        speaker=speaker,
        surface=surface,
        preceding=tuple(preceding),
        attachments=tuple(attachments),
        notifies=draw(st.booleans()),
        viewing=draw(
            st.none()
            | st.builds(
                Viewing,
                st.sampled_from(list(SurfaceKind)),
                st.one_of(st.none(), untrusted_text(3)),
            )
        ),
    )
    history = [
        HistoryEntry(
            draw(st.sampled_from(["user", "assistant"])),
            (TextBlock(draw(untrusted_text(4))),),
            speaker=draw(st.one_of(st.none(), untrusted_text(2))),
            summary=draw(st.booleans()),
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    memory = [
        MemoryHit(f"m{i}", draw(untrusted_text()), "s", 1.0, draw(_TIMES))
        for i in range(draw(st.integers(0, 3)))
    ]
    files = draw(attached())
    if files.blocks and history and draw(st.booleans()):
        last = history[-1]
        history[-1] = replace(last, role="user", blocks=(*last.blocks, *files.blocks))
    return request, history, memory, files


def _fence_tags(body: Any) -> list[str]:
    """Every fence tag occurrence in every text the model reads, in order."""
    texts = [b["text"] for b in body["system"]]
    for message in body["messages"]:
        texts += [b.get("text", "") + str(b.get("content", "")) for b in message["content"]]
    return [form for t in texts for form in fence_forms(t)]


def _blank(text: str) -> str:
    return "x" if text else ""


def _blanked(
    request: TurnRequest, history: list[HistoryEntry], memory: list[MemoryHit], files: Attached
) -> tuple[TurnRequest, list[HistoryEntry], list[MemoryHit], Attached]:
    """The same structure with every untrusted string replaced by plain text."""
    surface = request.surface and replace(request.surface, name=_blank(request.surface.name or ""))
    speaker = request.speaker and Speaker(
        _blank(request.speaker.name), request.speaker.handle and "h"
    )
    clean = replace(
        request,
        text=_blank(request.text),
        surface=surface,
        speaker=speaker,
        preceding=tuple(
            replace(p, name="n", text="t", handle=p.handle and "h") for p in request.preceding
        ),
        attachments=tuple(replace(a, name="a", media_type="m") for a in request.attachments),
    )
    clean_files = Attached(
        tuple(replace(b, name="a", problem=b.problem and "p") for b in files.blocks),
        {key: b"x" if value else b"" for key, value in files.contents.items()},
    )
    clean_history = [
        replace(
            e,
            blocks=(
                TextBlock(_blank(e.text)),
                *(
                    replace(b, name="a", problem=b.problem and "p")
                    for b in e.blocks
                    if isinstance(b, AttachmentBlock)
                ),
            ),
            speaker=e.speaker and "s",
        )
        for e in history
    ]
    return clean, clean_history, [replace(hit, text="fact") for hit in memory], clean_files


def _assemble(turn: Turn) -> dict[str, Any]:
    request, history, memory, files = turn
    return wire_body(ASSEMBLER.assemble(request, history, memory, attached=files))


# (a) as one test: generating a turn is most of the time, so each generated turn is checked for
# both: the same fence tags as the host's own structure, and each of them on a line of its own.
@SETTINGS
@given(turns())
def test_untrusted_input_never_opens_or_closes_a_fence_and_every_fence_line_is_the_hosts(
    turn: Turn,
) -> None:
    body = _assemble(turn)
    expected = _assemble(_blanked(*turn))
    assert _fence_tags(body) == _fence_tags(expected)
    blocks = body["messages"][-1]["content"]
    current = "\n".join(b["text"] for b in blocks if b["type"] == "text")
    for line in current.split("\n"):
        for form in fence_forms(line):
            assert form in {
                "<turn_context",
                "</turn_context",
                "<preceding_messages",
                "</preceding_messages",
                "<speaker",
                "</speaker",
                "<recalled_memory",
                "</recalled_memory",
                "<attachment",
                "</attachment",
                "<conversation_summary",
                "</conversation_summary",
            }
            # A host tag either fills its line or is the speaker tag opening the person's line.
            assert line.startswith(("<", "</")), line


# Hidden values carry a snowman, which generated untrusted text never contains, so finding one in
# the request is a real leak and never a coincidence.
_HIDDEN = st.text(alphabet="☃0123456789abcdefXYZ", min_size=12, max_size=24).map(lambda s: "☃" + s)


@SETTINGS
@given(turns(), _HIDDEN, _HIDDEN, _HIDDEN, _HIDDEN)
def test_hidden_values_never_reach_the_request(
    turn: Turn,
    thread: str,
    user_id: str,
    token: str,
    person: str,
) -> None:
    request, history, memory, files = turn
    hidden = replace(
        request,
        route=ReplyRoute(
            "slack",
            {
                "channel": "C0A1B2C3D",
                "thread_ts": thread,
                "user": user_id,
                "token": token,
                "reply_to": thread,
                "files": [f"https://files.slack.com/files-pri/{token}/a.png", thread],
            },
        ),
        person=person,
    )
    assembler: Assembler = ASSEMBLER
    body = wire_body(assembler.assemble(hidden, history, memory, attached=files))
    entry = assembler.user_entry(hidden, files)
    for serialized in (
        json.dumps(body),
        json.dumps(body, ensure_ascii=False),
        repr(entry),
    ):
        for value in (thread, user_id, token, person):
            assert value not in serialized
            assert json.dumps(value)[1:-1] not in serialized
