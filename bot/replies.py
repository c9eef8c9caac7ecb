"""Every sentence the host itself says to a person in chat (refusals, notices), in one place.

Short, plain and polite; each says what happened and what the person can do. None of them ever
names a platform id, a route or a secret.
"""

from __future__ import annotations

from datetime import datetime

# Which budget ran out, as the person should hear it.
_BUDGET_SCOPES = {
    "overall": "my usage budget for today",
    "surface": "today's usage budget for this chat",
    "person": "your usage budget for today",
}


def budget_reached(scope: str, resets_at: datetime) -> str:
    """The one notice a person gets when a daily budget is reached (no model call is made)."""
    what = _BUDGET_SCOPES.get(scope, "a usage budget")
    when = resets_at.strftime("%Y-%m-%d %H:%M")
    zone = resets_at.tzname() or "UTC"
    return (
        f"I've reached {what}, so I'll stay quiet here until it resets at {when} {zone}. "
        "Messages sent before then won't get an answer."
    )


# --- attachments: why a file was not read ------------------------------------------------------

IMAGE_DAMAGED = "the image could not be decoded (damaged or cut short)"
IMAGE_BOMB = "the image has too many pixels to decode safely"
PDF_DAMAGED = "the PDF could not be read (damaged or cut short)"
PDF_LOCKED = "the PDF is password-protected"
PDF_EMPTY = "the PDF has no pages"
DOWNLOAD_REFUSED = "the platform refused the download"
DOWNLOAD_FAILED = "the download failed; please send it again"
NOT_FETCHABLE = "files from here cannot be downloaded"
ATTACHMENTS_OFF = "reading files is turned off here"


def image_too_large(width: int, height: int) -> str:
    return f"the image is {width}×{height} pixels, too large to decode safely"


def pdf_too_large(limit_mb: int) -> str:
    return f"the PDF is over the model's {limit_mb} MB limit"


def pdf_too_long(pages: int, limit: int) -> str:
    return f"the PDF has {pages} pages; I can read at most {limit}"


def file_too_large(limit: str) -> str:
    return f"it is larger than the {limit} limit"


def unsupported_type(media_type: str) -> str:
    return (
        f"its type ({media_type}) is not one I can read; I read PNG, JPEG, GIF and WebP images, "
        "PDFs and text files"
    )


def too_many_files(limit: int) -> str:
    return f"I read at most {limit} files from one message"


def attachment_problem(name: str, reason: str) -> str:
    """One line for the person about one file that was not read."""
    return f"I couldn't read “{name}”: {reason}."
