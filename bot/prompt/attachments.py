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
The request's size, on either wire, is `bot.prompt.fitting`'s.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence

from bot.ports.request import Document, Image, Part, Text
from bot.prompt.fence import neutralize, one_line, scrub
from bot.turns import AttachmentBlock

INLINE_MAX_CHARS = 6_000
NAME_MAX_CHARS = 120
# The provider's published estimates: an image costs about width*height/750 tokens; a PDF page is
# read as an image plus its text, 1,500 to 3,000 tokens; the estimate takes the upper middle.
IMAGE_PIXELS_PER_TOKEN = 750
PDF_TOKENS_PER_PAGE = 2_000

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
