"""PDFs people share, checked before they reach the model: readable, not encrypted, and within
the provider's limits (100 pages for a document block; the request's 32 MB, which a PDF's base64
text must fit with the rest of the request: 20 MB of PDF is 26.7 MB of it). The only module that
imports pypdf.
"""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from bot import replies
from bot.errors import FileUnreadable

MAX_PAGES = 100
MAX_BYTES = 20 * 1024 * 1024

# pypdf logs every repair it makes to a sloppy file as a warning; the outcome is what matters.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def pdf_pages(data: bytes) -> int:
    """The page count of a PDF the model can read; FileUnreadable otherwise."""
    if len(data) > MAX_BYTES:
        raise FileUnreadable(replies.pdf_too_large(MAX_BYTES // (1024 * 1024)))
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise FileUnreadable(replies.PDF_LOCKED)
        pages = len(reader.pages)
    except FileUnreadable:
        raise
    except (PyPdfError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise FileUnreadable(replies.PDF_DAMAGED) from None
    if pages == 0:
        raise FileUnreadable(replies.PDF_EMPTY)
    if pages > MAX_PAGES:
        raise FileUnreadable(replies.pdf_too_long(pages, MAX_PAGES))
    return pages
