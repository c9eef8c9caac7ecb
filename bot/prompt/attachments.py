"""Attachments in the request (pure): each file's marker, its content blocks, its token estimate,
and the media-free copy of a request body that turn records keep.

A marker names the file where the person put it, `[attachment 1: report.pdf, PDF, 12 pages,
240 KB]`, or a transcribed voice note, `[voice note 1: 0:07, transcribed]`; the name is untrusted
text, made one line, bounded and neutralized, and its square brackets become parentheses, so no
name can close its marker or pose as another one. A transcript is kept and rendered like a text
file's text (the audio never is). The content follows the person's text in the same user message:
an image block, a document block, or the file's text inside an `<attachment>` fence (neutralized,
the first `INLINE_MAX_CHARS` characters). Content is rendered from the stored bytes, which never
change, so a replayed turn is byte-stable and the provider's prompt cache keeps serving it.
Without its bytes (pruned from the store, or never read) an attachment is its marker alone.

The request as a whole stays under the API's 32 MB: `fit_request` replaces image and document
blocks by a short note, oldest first, until the body is within `REQUEST_BUDGET`, and replaces the
content the API refused (by content id) the same way. The marker stays, so the model still knows
the file was shared.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.ports.request import Document, Image, Part, Text
from bot.prompt.fence import neutralize, one_line, scrub
from bot.turns import AttachmentBlock

INLINE_MAX_CHARS = 6_000
NAME_MAX_CHARS = 120
# The provider's published estimates: an image costs about width*height/750 tokens; a PDF page is
# read as an image plus its text, 1,500 to 3,000 tokens; the estimate takes the upper middle.
IMAGE_PIXELS_PER_TOKEN = 750
PDF_TOKENS_PER_PAGE = 2_000
MEDIA_BLOCK_TYPES = frozenset({"image", "document"})
# The API refuses a Messages request over 32 MB (read strictly: 32,000,000 bytes); the budget keeps
# a margin for the HTTP framing and for a serializer that escapes differently from ours.
REQUEST_MAX_BYTES = 32_000_000
REQUEST_BUDGET = 30_000_000
# What the model reads where a file's content was left out (its marker stays in the text).
LEFT_OUT_FOR_SIZE = (
    "[The content of the file above is left out: with it the request would be over the model "
    "API's size limit.]"
)
LEFT_OUT_REFUSED = (
    "[The content of the file above is left out: the model API could not process it.]"
)

_KIND_LABELS = {"pdf": "PDF", "text": "text file"}
_IMAGE_LABELS = {
    "image/png": "PNG image",
    "image/jpeg": "JPEG image",
    "image/gif": "GIF image",
    "image/webp": "WebP image",
}


def size_text(size: int) -> str:
    """`980 bytes`, `240 KB`, `3.4 MB` (binary units, as file managers show them)."""
    if size < 1024:
        return f"{max(size, 0)} bytes"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def clock_text(seconds: float) -> str:
    """`0:07`, `12:30`, `1:02:03`: a recording's length as players show it."""
    minutes, secs = divmod(max(round(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_BRACKETS = str.maketrans("[]", "()")


def inert(text: str, max_chars: int) -> str:
    """Untrusted text for inside a marker: one line, bounded, neutralized, no square brackets."""
    return neutralize(one_line(scrub(text), max_chars)).translate(_BRACKETS)


def safe_name(name: str) -> str:
    """A file name as the model may read it: one line, bounded, neutralized, `[` `]` as `(` `)`."""
    return inert(name, NAME_MAX_CHARS) or "unnamed"


def marker(block: AttachmentBlock) -> str:
    """`[attachment 1: report.pdf, PDF, 12 pages, 240 KB]`, or why the file was not read."""
    if block.kind == "voice" or (block.kind == "audio" and block.problem is not None):
        return voice_marker(block)
    facts = [safe_name(block.name), *_facts(block), size_text(block.size)]
    if block.problem is not None:
        # Host-written, but it may quote a declared media type: made safe like the name.
        facts.append(f"not read: {inert(block.problem, 300)}")
    elif block.kind == "text" and block.detail.get("chars", 0) > INLINE_MAX_CHARS:
        facts.append(
            f"the first {INLINE_MAX_CHARS:,} characters are shown; read the rest with the "
            f'read_attachment tool, id "{short_id(block)}"'
        )
    return f"[attachment {block.index}: {', '.join(facts)}]"


# The name a channel gives a voice note that has none of its own: not repeated in the marker.
_UNNAMED_VOICE = "voice note"


def voice_marker(block: AttachmentBlock) -> str:
    """`[voice note 1: 0:07, transcribed]` (a named audio file keeps its name), or why it was not
    transcribed: `[voice note 2: 20:00, not transcribed: it is 20:00 long, ...]`."""
    facts = [] if block.name.strip().lower() == _UNNAMED_VOICE else [safe_name(block.name)]
    if "seconds" in block.detail:
        facts.append(clock_text(block.detail["seconds"]))
    if block.problem is not None:
        facts.append(f"not transcribed: {neutralize(one_line(scrub(block.problem), 300))}")
    else:
        facts.append("transcribed")
        if block.detail.get("chars", 0) > INLINE_MAX_CHARS:
            facts.append(
                f"the first {INLINE_MAX_CHARS:,} characters are shown; read the rest with the "
                f'read_attachment tool, id "{short_id(block)}"'
            )
    return f"[voice note {block.index}: {', '.join(facts)}]"


def _facts(block: AttachmentBlock) -> list[str]:
    detail = block.detail
    if block.kind == "image":
        label = _IMAGE_LABELS.get(block.media_type, "image")
        if "width" in detail and "height" in detail:
            return [label, f"{detail['width']}×{detail['height']} px"]
        return [label]
    if block.kind == "pdf" and "pages" in detail:
        pages = detail["pages"]
        return ["PDF", f"{pages} page" + ("" if pages == 1 else "s")]
    if block.kind == "text" and "chars" in detail:
        return ["text file", f"{detail['chars']:,} characters"]
    if block.kind == "audio":
        seconds = detail.get("seconds")
        length = f"{seconds} seconds, " if seconds is not None else ""
        return [f"voice or audio message ({length}not transcribed)"]
    if block.kind in _KIND_LABELS:
        return [_KIND_LABELS[block.kind]]
    return [inert(block.media_type, 80) or "file"]


def short_id(block: AttachmentBlock) -> str:
    """The id the model passes to read_attachment: the first 16 hex digits of the content id."""
    return (block.content_id or "")[:16]


def markers(blocks: Sequence[AttachmentBlock]) -> str:
    return "\n".join(marker(block) for block in blocks)


def content_blocks(blocks: Sequence[AttachmentBlock], contents: Mapping[str, bytes]) -> list[Part]:
    """The content parts for the attachments whose bytes are at hand, in marker order."""
    rendered: list[Part] = []
    for block in blocks:
        data = contents.get(block.content_id) if block.content_id else None
        if data is not None and block.problem is None:
            item = _content(block, data)
            if item is not None:
                rendered.append(item)
    return rendered


def _content(block: AttachmentBlock, data: bytes) -> Part | None:
    if block.kind == "image":
        return Image(block.media_type, _base64(data))
    if block.kind == "pdf":
        return Document("application/pdf", _base64(data))
    if block.kind in ("text", "voice"):  # a voice note's transcript is untrusted text too
        text = data.decode("utf-8", errors="replace")
        shown = text[:INLINE_MAX_CHARS]
        cut = len(text) - len(shown)
        tail = f"\n[... {cut:,} more characters not shown]" if cut else ""
        body = neutralize(scrub(shown)) + tail
        return Text(f'<attachment index="{block.index}">\n{body}\n</attachment>')
    return None


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def attachment_tokens(block: AttachmentBlock) -> int:
    """The estimated input tokens of an attachment's content (its marker is counted as text)."""
    if block.problem is not None or block.content_id is None:
        return 0
    detail = block.detail
    if block.kind == "image":
        pixels = detail.get("width", 0) * detail.get("height", 0)
        return math.ceil(pixels / IMAGE_PIXELS_PER_TOKEN)
    if block.kind == "pdf":
        return detail.get("pages", 1) * PDF_TOKENS_PER_PAGE
    if block.kind in ("text", "voice"):
        # About four characters a token for prose and code; the inline part only.
        return math.ceil(min(detail.get("chars", 0), INLINE_MAX_CHARS) / 4) + 16
    return 0


# --- turn records -------------------------------------------------------------------------------


def strip_media(value: Any) -> Any:
    """A copy of a request body with every image/document payload replaced by a short
    placeholder (its size and digest), so records name attachments and never embed them."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "text" and isinstance(value.get("text"), str):
            return value  # most of a body, and never a payload: not walked or copied
        if kind == "base64" and isinstance(value.get("data"), str):
            data = value["data"]
            digest = hashlib.sha256(data.encode("ascii", errors="replace")).hexdigest()[:16]
            return {**value, "data": f"[base64, {len(data)} characters, sha256 {digest}]"}
        return {key: strip_media(item) for key, item in value.items()}
    if isinstance(value, list):
        return [strip_media(item) for item in value]
    return value


# --- the request's size ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fitted:
    """A request body within the byte budget, and the content ids of what was left out."""

    body: dict[str, Any]
    left_out: tuple[str, ...] = ()  # for size, oldest first
    refused: tuple[str, ...] = ()  # content the API refused, found in this body


def media_id(block: Mapping[str, Any]) -> str:
    """The content id of an image or document block: the sha256 of its bytes, as stored."""
    data = str(block.get("source", {}).get("data", ""))
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode("ascii", errors="replace")
    return hashlib.sha256(raw).hexdigest()


def media_blocks(body: Mapping[str, Any]) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """(message index, block index, block) of every base64 image or document, oldest first."""
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            if (
                isinstance(block, Mapping)
                and block.get("type") in MEDIA_BLOCK_TYPES
                and isinstance(block.get("source"), Mapping)
                and block["source"].get("type") == "base64"
            ):
                yield m, b, block


def request_size(body: Mapping[str, Any]) -> int:
    """The body's size as JSON, in bytes, at most a few bytes over what any serializer sends
    (non-ASCII text counted escaped); media are counted by their base64 length, not copied."""
    media = 0

    def blank(value: Any) -> Any:
        nonlocal media
        if isinstance(value, Mapping):
            if value.get("type") == "base64" and isinstance(value.get("data"), str):
                media += len(value["data"])
                return {**value, "data": ""}
            return {key: blank(item) for key, item in value.items()}
        if isinstance(value, list):
            return [blank(item) for item in value]
        return value

    return len(json.dumps(blank(body)).encode("utf-8")) + media


def fit_request(
    body: Mapping[str, Any], refused: Collection[str] = (), budget: int = REQUEST_BUDGET
) -> Fitted:
    """`body` with the content in `refused` replaced by a note, then images and documents
    replaced oldest first until the whole body is within `budget` bytes."""
    found = list(media_blocks(body))
    if not found:
        return Fitted(dict(body))
    notes: dict[tuple[int, int], str] = {}
    refused_here: list[str] = []
    if refused:
        for m, b, block in found:
            content_id = media_id(block)
            if content_id in refused:
                notes[(m, b)] = LEFT_OUT_REFUSED
                refused_here.append(content_id)
    excess = request_size(body) - budget
    left_out: list[str] = []
    for m, b, block in found:
        if excess <= 0:
            break
        if (m, b) in notes:
            excess -= len(block["source"]["data"])
            continue
        notes[(m, b)] = LEFT_OUT_FOR_SIZE
        left_out.append(media_id(block))
        excess -= len(block["source"]["data"]) - len(LEFT_OUT_FOR_SIZE)
    if not notes:
        return Fitted(dict(body))
    return Fitted(_with_notes(body, notes), tuple(left_out), tuple(dict.fromkeys(refused_here)))


def _with_notes(body: Mapping[str, Any], notes: Mapping[tuple[int, int], str]) -> dict[str, Any]:
    messages = list(body.get("messages") or [])
    for m in sorted({m for m, _ in notes}):
        content = list(messages[m]["content"])
        for (at, b), note in notes.items():
            if at == m:
                replaced: dict[str, Any] = {"type": "text", "text": note}
                if "cache_control" in content[b]:
                    replaced["cache_control"] = content[b]["cache_control"]
                content[b] = replaced
        messages[m] = {**messages[m], "content": content}
    return {**body, "messages": messages}
