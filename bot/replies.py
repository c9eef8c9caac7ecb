"""Sentences the host itself says to people (not the model's words), in one place.

Each is short, plain and says what happened and, where the person can act, what to do. The
attachment reasons double as the "not read: ..." part of a file's marker, so the model and the
person are told the same thing.
"""

from __future__ import annotations

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
