"""What a shared file is and the form the model gets it in (pure, CPU only; no I/O).

The bytes decide, not the declared type: a file that starts like a PNG, JPEG, GIF, WebP or PDF is
read as one (and refused if it does not decode); otherwise a file declared or named as text, or
whose bytes are plainly text, is read as text: UTF-8 when it is that, else in the encoding
charset-normalizer detects (cp1252, Shift-JIS, UTF-16 or UTF-32 with or without a byte order
mark, ...), and kept as UTF-8. Anything else is an unsupported type.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from bot import replies
from bot.errors import FileUnreadable

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image"),
    (b"\xff\xd8\xff", "image"),
    (b"GIF87a", "image"),
    (b"GIF89a", "image"),
    (b"%PDF-", "pdf"),
)
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/csv",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "application/toml",
        "application/x-ndjson",
        "image/svg+xml",
    }
)
_TEXT_SUFFIXES = frozenset(
    [
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".log",
        ".json",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".xml",
        ".html",
        ".htm",
        ".css",
        ".svg",
        ".py",
        ".js",
        ".mjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".pl",
        ".swift",
        ".scala",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".sql",
        ".diff",
        ".patch",
        ".tex",
        ".r",
        ".lua",
        ".dart",
        ".vue",
        ".proto",
        ".graphql",
        ".gradle",
        ".properties",
        ".dockerfile",
        ".makefile",
        ".srt",
        ".vtt",
    ]
)
_UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# Text may carry a few odd bytes (a stray Latin-1 character); a binary file carries many.
_MAX_ODD_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class Ready:
    """A file in the form the model gets it: `data` is what the store keeps and replays."""

    kind: str  # "image", "pdf" or "text"
    media_type: str
    data: bytes
    detail: dict[str, int] = field(default_factory=dict)


def sniff(data: bytes) -> str | None:
    """ "image" or "pdf" when the bytes start like a supported image or a PDF."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image"
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    return None


def read_file(name: str, media_type: str, data: bytes) -> Ready:
    """`data` made ready for the model, or FileUnreadable with the reason."""
    declared = media_type.split(";", 1)[0].strip().lower()
    kind = sniff(data)
    if kind == "image":
        return _image(data)
    if kind == "pdf":
        return _pdf(data)
    if declared == "application/pdf":
        raise FileUnreadable(replies.PDF_DAMAGED)
    if declared in ("image/png", "image/jpeg", "image/gif", "image/webp"):
        raise FileUnreadable(replies.IMAGE_DAMAGED)
    text = _text(name, declared, data)
    if text is None:
        raise FileUnreadable(replies.unsupported_type(declared or "unknown"))
    mime = declared if _is_text_type(declared) else "text/plain"
    return Ready("text", mime, text.encode("utf-8"), {"chars": len(text)})


def _image(data: bytes) -> Ready:
    # Pillow, pypdf and charset-normalizer load with the first file that needs them: most turns
    # carry none, and a host (or `bot chat`) starts a few hundred ms sooner without them.
    from bot.attachments.images import prepare_image

    image = prepare_image(data)
    detail = {"width": image.width, "height": image.height}
    return Ready("image", image.media_type, image.data, detail)


def _pdf(data: bytes) -> Ready:
    from bot.attachments.pdf import pdf_pages

    pages = pdf_pages(data)
    return Ready("pdf", "application/pdf", data, {"pages": pages})


def _is_text_type(declared: str) -> bool:
    return (
        declared.startswith("text/")
        or declared in _TEXT_TYPES
        or declared.endswith(("+json", "+xml"))
    )


def _text(name: str, declared: str, data: bytes) -> str | None:
    """The file's text when it is a text file, else None; FileUnreadable when it says it is
    text (by type or name) and no encoding reads it."""
    suffix = PurePosixPath(name.lower()).suffix
    textual = _is_text_type(declared) or suffix in _TEXT_SUFFIXES
    if not textual and declared not in _UNTYPED:
        return None
    text = decode_text(data)
    if text is not None and _odd_share(text) <= _MAX_ODD_SHARE:
        return text
    if textual:
        raise FileUnreadable(replies.TEXT_UNDECODABLE)
    return None


def decode_text(data: bytes) -> str | None:
    """`data` as text: UTF-8 (a byte order mark dropped) when it is that, else the encoding
    charset-normalizer finds most plausible; None when none reads it."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    return str(best) if best is not None else None


def _odd_share(text: str) -> float:
    """The share of replacement and control characters (tabs and line breaks are fine)."""
    if not text:
        return 0.0
    sample = text[:65_536]
    odd = sum(
        1
        for ch in sample
        if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\f")
    )
    return odd / len(sample)
