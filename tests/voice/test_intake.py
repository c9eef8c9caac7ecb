"""The attachment intake with a transcriber (a double of the port; the real one runs in the
channel tests): each way a voice note can go wrong becomes its one line and its marker, the
transcript is stored by content and handed to the request, and the audio never is. Runs without
the voice extra."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from bot.attachments.intake import AttachmentIntake
from bot.config import AttachmentSettings
from bot.errors import AudioRefused, FileRefused
from bot.ports.attachments import StoredAttachment
from bot.ports.voice import Transcript
from bot.prompt.attachments import marker
from bot.turns import Attachment, ConversationKind, ReplyRoute, TurnRequest


class Store:
    """An in-memory AttachmentStore: what was put, by content id."""

    def __init__(self) -> None:
        self.kept: dict[str, tuple[str, bytes]] = {}

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        self.kept[content_id] = (media_type, data)

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        return {cid: self.kept[cid][1] for cid in content_ids if cid in self.kept}

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        return None


class Source:
    """A channel's FileSource: the audio bytes, or a refusal, per attachment."""

    def __init__(self, *items: bytes | FileRefused) -> None:
        self.items = items
        self.asked: list[int] = []

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        self.asked.append(index)
        item = self.items[index]
        if isinstance(item, FileRefused):
            raise item
        return item


class Scripted:
    """A Transcriber that answers each call from its script (a transcript or a refusal)."""

    def __init__(self, *script: Transcript | AudioRefused, max_seconds: int = 300) -> None:
        self.script = list(script)
        self.heard: list[bytes] = []
        self._max_seconds = max_seconds

    @property
    def max_seconds(self) -> int:
        return self._max_seconds

    async def transcribe(self, data: bytes) -> Transcript:
        self.heard.append(data)
        answer = self.script.pop(0)
        if isinstance(answer, AudioRefused):
            raise answer
        return answer


def _request(*attachments: Attachment) -> TurnRequest:
    return TurnRequest(
        conversation_key="telegram:42",
        kind=ConversationKind.PUSH,
        channel="telegram",
        text="",
        received_at=datetime(2026, 3, 1, tzinfo=UTC),
        turn_id="t1",
        attachments=attachments,
        route=ReplyRoute("telegram", {"files": ["hidden"] * len(attachments)}),
    )


def _note(seconds: int | None = 7, name: str = "voice note") -> Attachment:
    return Attachment(name, "audio/ogg", 1000, seconds)


async def test_a_transcript_is_stored_by_content_and_handed_to_the_request() -> None:
    store = Store()
    transcriber = Scripted(Transcript("  water the tomatoes  ", 7.4))
    sources = {"telegram": Source(b"OggS...")}
    intake = AttachmentIntake(store, AttachmentSettings(), sources, transcriber)
    attached = await intake.take(_request(_note()), [])
    [block] = attached.blocks
    assert marker(block) == "[voice note 1: 0:07, transcribed]"
    said = b"water the tomatoes"
    assert block.content_id == hashlib.sha256(said).hexdigest()
    assert attached.contents == {block.content_id: said}
    assert store.kept == {block.content_id: ("text/plain", said)}  # never the audio
    assert attached.problems == ()
    assert transcriber.heard == [b"OggS..."]


async def test_each_way_a_voice_note_fails_is_one_line_and_a_marker() -> None:
    transcriber = Scripted(
        AudioRefused("unreadable", "InvalidDataError"),
        AudioRefused("timeout", "over 120 s"),
        AudioRefused("failed", "model.bin does not match"),
        AudioRefused("too_long", "decoded length passed the cap"),
        AudioRefused("too_long", "declared length", 1200.0),
        Transcript("", 9.0),
        max_seconds=60,
    )
    notes = [_note(name=f"note{i}.ogg") for i in range(6)]
    source = Source(*[b"audio"] * 6, FileRefused("refused", "403"), FileRefused("too_large", "x"))
    notes += [_note(name="gone.ogg"), _note(name="big.ogg"), _note(61, "long.ogg")]
    settings = AttachmentSettings(max_per_message=10)
    intake = AttachmentIntake(Store(), settings, {"telegram": source}, transcriber)
    attached = await intake.take(_request(*notes), [])
    assert [marker(b) for b in attached.blocks] == [
        "[voice note 1: note0.ogg, 0:07, not transcribed: it could not be played as audio "
        "(damaged, or not a sound recording)]",
        "[voice note 2: note1.ogg, 0:07, not transcribed: transcribing it took too long; a "
        "shorter recording will work better]",
        "[voice note 3: note2.ogg, 0:07, not transcribed: transcription failed on my side; "
        "please send it again later]",
        "[voice note 4: note3.ogg, 0:07, not transcribed: it is longer than the 1:00 I transcribe]",
        "[voice note 5: note4.ogg, 20:00, not transcribed: it is 20:00 long, and I transcribe "
        "recordings of up to 1:00]",
        "[voice note 6: note5.ogg, 0:09, not transcribed: I heard no speech in it]",
        "[voice note 7: gone.ogg, 0:07, not transcribed: the platform refused the download]",
        "[voice note 8: big.ogg, 0:07, not transcribed: it is larger than the 20.0 MB limit]",
        "[voice note 9: long.ogg, 1:01, not transcribed: it is 1:01 long, and I transcribe "
        "recordings of up to 1:00]",
    ]
    assert source.asked == list(range(8))  # the declared 61 s note was not downloaded
    assert len(attached.problems) == 9
    assert attached.problems[5] == "I couldn't read “note5.ogg”: I heard no speech in it."
    assert attached.contents == {}


async def test_voice_notes_follow_the_attachment_settings() -> None:
    off = AttachmentIntake(Store(), AttachmentSettings(enabled=False), {}, Scripted())
    [block] = (await off.take(_request(_note()), [])).blocks
    assert marker(block) == (
        "[voice note 1: 0:07, not transcribed: reading files is turned off here]"
    )
    nowhere = AttachmentIntake(Store(), AttachmentSettings(), {}, Scripted())
    [block] = (await nowhere.take(_request(_note(None)), [])).blocks
    assert marker(block) == "[voice note 1: not transcribed: files from here cannot be downloaded]"
