"""A request body's media and size, on either wire (pure): where its images and documents are,
their content ids, the body's size in bytes, the body fitted within a wire's request budget, and
the media-free copy turn records keep.

Media are Anthropic's base64 `image` / `document` blocks (`source.data`) and the OpenAI-compatible
wire's data URLs (`image_url.url`, `file.file_data`). `fit_request` replaces the content the API
refused (by content id), then media oldest first, by a short note until the body is within the
budget; the marker naming the file stays in the text, so the model still knows it was shared.
Each wire's budget keeps a margin under its server's limit: Anthropic refuses a Messages request
over 32 MB, OpenAI a Chat Completions request whose payload passes 50 MB or 500 images (the
compatible servers people run locally are set lower: 20 MB is what they take by default).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MEDIA_BLOCK_TYPES = frozenset({"image", "document"})
REQUEST_BUDGET = 30_000_000  # the Messages API's 32,000,000 bytes, less HTTP framing's margin
REQUEST_BUDGETS = {"anthropic": REQUEST_BUDGET, "openai": 18_000_000}
MAX_MEDIA = {"anthropic": 100, "openai": 500}  # images and documents one request may carry
# What the model reads where a file's content was left out (its marker stays in the text).
LEFT_OUT_FOR_SIZE = (
    "[The content of the file above is left out: with it the request would be over the model "
    "API's size limit.]"
)
LEFT_OUT_REFUSED = (
    "[The content of the file above is left out: the model API could not process it.]"
)
_DATA_URL_FIELDS = {"image_url": "url", "file": "file_data"}  # OpenAI part type -> its field


def payload(block: Mapping[str, Any]) -> str | None:
    """The base64 bytes an image or document block carries, on either wire; None for any
    other block."""
    kind = block.get("type")
    if kind in MEDIA_BLOCK_TYPES:
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            data = source.get("data")
            return data if isinstance(data, str) else None
        return None
    field = _DATA_URL_FIELDS.get(str(kind))
    inner = block.get(str(kind)) if field else None
    if field is None or not isinstance(inner, Mapping):
        return None
    url = inner.get(field)
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url[:200]:
        return url.partition(";base64,")[2]
    return None


def media_id(block: Mapping[str, Any]) -> str:
    """The content id of an image or document block: the sha256 of its bytes, as stored."""
    data = payload(block) or ""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode("ascii", errors="replace")
    return hashlib.sha256(raw).hexdigest()


def media_blocks(body: Mapping[str, Any]) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """(message index, block index, block) of every base64 image or document, oldest first."""
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            if isinstance(block, Mapping) and payload(block) is not None:
                yield m, b, block


def _placeholder(data: str) -> str:
    digest = hashlib.sha256(data.encode("ascii", errors="replace")).hexdigest()[:16]
    return f"[base64, {len(data)} characters, sha256 {digest}]"


def strip_media(value: Any) -> Any:
    """A copy of a request body with every image/document payload replaced by a short
    placeholder (its size and digest), so records name attachments and never embed them."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "text" and isinstance(value.get("text"), str):
            return value  # most of a body, and never a payload: not walked or copied
        if kind == "base64" and isinstance(value.get("data"), str):
            return {**value, "data": _placeholder(value["data"])}
        stripped = {key: strip_media(item) for key, item in value.items()}
        for key in ("url", "file_data"):
            url = value.get(key)
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url[:200]:
                head, _, data = url.partition(";base64,")
                stripped[key] = f"{head};base64,{_placeholder(data)}"
        return stripped
    if isinstance(value, list):
        return [strip_media(item) for item in value]
    return value


def request_size(body: Mapping[str, Any]) -> int:
    """The body's size as JSON, in bytes, at most a few bytes over what any serializer sends
    (non-ASCII text counted escaped); media are counted by their length, not copied."""
    media = 0

    def blank(value: Any) -> Any:
        nonlocal media
        if isinstance(value, Mapping):
            if value.get("type") == "base64" and isinstance(value.get("data"), str):
                media += len(value["data"])
                return {**value, "data": ""}
            blanked = {}
            for key, item in value.items():
                if key in ("url", "file_data") and isinstance(item, str) and len(item) > 4096:
                    media += len(item)
                    blanked[key] = ""
                else:
                    blanked[key] = blank(item)
            return blanked
        if isinstance(value, list):
            return [blank(item) for item in value]
        return value

    return len(json.dumps(blank(body)).encode("utf-8")) + media


@dataclass(frozen=True, slots=True)
class Fitted:
    """A request body within the byte budget, and the content ids of what was left out."""

    body: dict[str, Any]
    left_out: tuple[str, ...] = ()  # for size (or count), oldest first
    refused: tuple[str, ...] = ()  # content the API refused, found in this body


def fit_request(
    body: Mapping[str, Any],
    refused: Collection[str] = (),
    budget: int = REQUEST_BUDGET,
    max_media: int | None = None,
) -> Fitted:
    """`body` with the content in `refused` replaced by a note, then images and documents
    replaced oldest first until the whole body is within `budget` bytes and carries at most
    `max_media` of them."""
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
    extra = len(found) - len(notes) - (len(found) if max_media is None else max_media)
    left_out: list[str] = []
    for m, b, block in found:
        if excess <= 0 and extra <= 0:
            break
        if (m, b) in notes:
            excess -= len(payload(block) or "")
            continue
        notes[(m, b)] = LEFT_OUT_FOR_SIZE
        left_out.append(media_id(block))
        excess -= len(payload(block) or "") - len(LEFT_OUT_FOR_SIZE)
        extra -= 1
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
